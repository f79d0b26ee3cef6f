// A queue moved by the operator while a receiver and a sender are attached:
// the old owner detaches both with amqp:link:redirect, and the library
// attaches them again at the new owner — the receiver with the credit the
// application had left it, the sender with its unconfirmed messages handed
// back to the application as released.

#include "client/cluster_client.hpp"
#include "client/tests/cluster_fixture.hpp"
#include "client/tests/test_app.hpp"

#include "broker/server/tests/test_client.hpp"

#include <gtest/gtest.h>

#include <proton/receiver_options.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace wharf::client::test {
namespace {

// A queue name whose owner is `node` (placement decides on first use).
std::string queue_owned_by(two_node_cluster& cluster, int node, const std::string& prefix) {
    server::test::test_client probe(cluster.url(node));
    if (!probe.wait_open()) return {};
    for (int i = 0; i < 40; ++i) {
        const std::string name = prefix + "-" + std::to_string(i);
        auto r = probe.open_receiver(name, server::test::receiver_credit(0));
        const bool local = r.wait_open();
        r.close();
        if (local) return name;
    }
    return {};
}

std::vector<std::string> numbered(int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back("m" + std::to_string(i));
    return out;
}

TEST(redirect_client_move, links_follow_a_queue_that_moves) {
    cluster_options o;
    o.rules.clear();
    two_node_cluster cluster(o);
    ASSERT_TRUE(cluster.ok());
    const std::string queue = queue_owned_by(cluster, 1, "mv");
    ASSERT_FALSE(queue.empty()) << "no queue was placed on n1";

    // Opened at n2, served by n1.
    recorded_link rcv, snd;
    client_app app;
    rcv.set_ref(app.client().open_receiver(cluster.url(2), queue, rcv, proton::receiver_options().credit_window(0)));
    ASSERT_TRUE(rcv.wait_open());
    EXPECT_EQ(rcv.node(), "n1");
    rcv.grant(50);
    snd.set_ref(app.client().open_sender(cluster.url(2), queue, snd));
    ASSERT_TRUE(snd.wait_open());
    EXPECT_EQ(snd.node(), "n1");
    snd.send(numbered(0, 5));
    ASSERT_TRUE(rcv.wait_received(5));
    ASSERT_TRUE(snd.wait_accepted(5));

    std::string out;
    const auto code = run_tool({WHARF_WLM_PATH, "--metadata", cluster.metadata(), "move", queue, "n2", "--wait", "30"},
                               std::chrono::seconds(40), &out);
    ASSERT_EQ(code, std::optional<int>(0)) << out;

    // Both links are back, at n2, without an error or a close on the way.
    ASSERT_TRUE(rcv.wait_open(2)) << ::testing::PrintToString(rcv.events());
    ASSERT_TRUE(snd.wait_open(2)) << ::testing::PrintToString(snd.events());
    EXPECT_EQ(rcv.node(), "n2");
    EXPECT_EQ(snd.node(), "n2");
    // At least: n2 -> n1 at first, n1 -> n2 for the move (a node that has
    // not yet read the move may bounce the new attach once more).
    EXPECT_GE(rcv.ref().redirects(), 2) << ::testing::PrintToString(rcv.events());
    EXPECT_EQ(rcv.ref().node_address(), cluster.url(2));
    for (const auto& e : rcv.events()) EXPECT_EQ(e.find("error"), std::string::npos) << e;
    for (const auto& e : snd.events()) EXPECT_EQ(e.find("error"), std::string::npos) << e;
    // The receiver kept the credit it had not used (50 granted, 5 used); the
    // application granted nothing more.
    const auto credit = rcv.credit_at_open();
    ASSERT_EQ(credit.size(), 2u);
    EXPECT_EQ(credit[0], 0);
    EXPECT_EQ(credit[1], 45);

    snd.send(numbered(5, 10));
    ASSERT_TRUE(snd.wait_accepted(10));
    ASSERT_TRUE(rcv.wait_received(10)) << ::testing::PrintToString(rcv.events());
    const auto got = rcv.received();
    const std::set<std::string> distinct(got.begin(), got.end());
    for (const auto& m : numbered(0, 10)) EXPECT_TRUE(distinct.count(m)) << m << " missing";
    // Still one connection per node: n2's was reused for the move.
    EXPECT_EQ(app.client().connections().size(), 2u);
}

} // namespace
} // namespace wharf::client::test
