// A queue moved by the operator while a receiver and a sender are attached:
// the old owner detaches both with amqp:link:redirect, and the library
// attaches them again at the new owner — the receiver with the credit the
// application had left it, the sender with its unconfirmed messages handed
// back to the application as released.

#include "client/cluster_client.hpp"
#include "client/tests/cluster_fixture.hpp"
#include "client/tests/test_app.hpp"

#include "broker/server/tests/raw_peer.hpp"
#include "broker/server/tests/test_client.hpp"

#include <gtest/gtest.h>

#include <proton/condition.h>
#include <proton/link.h>
#include <proton/message.hpp>
#include <proton/receiver_options.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
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

// wharf-wlm's --wait is checked before anything is asked: -1 and NaN used
// to start the move and exit 0.
TEST(wharf_wlm_tool, bad_arguments_are_refused_before_anything_is_asked_or_created) {
    for (const char* wait : {"-1", "nan"}) {
        std::string out;
        const std::string store = "sqlite:" + std::string(::testing::TempDir()) + "wharf-wlm-not-created.db";
        EXPECT_EQ(run_tool({WHARF_WLM_PATH, "--metadata", store, "move", "q", "n2", "--wait", wait},
                           std::chrono::seconds(20), &out),
                  std::optional<int>(2))
            << out;
        EXPECT_NE(out.find("--wait"), std::string::npos) << out;
    }
    // A store path that does not exist (a typo) is not created and shown as
    // an empty cluster: status used to answer "nodes: queues:" and exit 0.
    const std::string missing = std::string(::testing::TempDir()) + "wharf-wlm-typo.db";
    std::string out;
    EXPECT_EQ(run_tool({WHARF_WLM_PATH, "--metadata", "sqlite:" + missing, "status"}, std::chrono::seconds(20), &out),
              std::optional<int>(2))
        << out;
    EXPECT_NE(out.find("no such file"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(missing));
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

// An at-most-once consumer attached through a relay (client at n2, queue at
// n1) took its credit back: what n1 had already passed on waits at n2 for
// credit that never comes. When the queue moves, those messages go back to
// the queue and move with it; before, n1 counted them as sent when it
// detached the link, and they were lost. Nothing the client got comes again.
TEST(relay_move, presettled_messages_waiting_at_the_relay_move_with_the_queue) {
    cluster_options o;
    o.rules = {"* -> node:n1"};
    o.mode = "relay";
    two_node_cluster cluster(o);
    ASSERT_TRUE(cluster.ok());
    const std::string queue = "amo-moving";
    constexpr int n = 20000, chunk = 100;

    server::test::raw_peer client(cluster.url(2));
    pn_link_t* r = client.open_receiver(queue, 2 * n, /*presettled=*/true, /*top_up=*/false);
    ASSERT_TRUE(client.run_until([&] { return client.remote_opened(r); })) << client.error();
    server::test::test_client producer(cluster.url(1));
    ASSERT_TRUE(producer.wait_open());
    auto s = producer.open_sender(queue);
    ASSERT_TRUE(s.wait_open());
    // Paced (a chunk, then its outcomes), so that n1 is still passing
    // messages on when n2 reads the client's flow: what n1 sent before it
    // heard of that waits at n2. (Sent all at once, every message was in
    // the socket to the client before the flow went out.)
    size_t accepted = 0;
    std::thread paced([&] {
        for (int i = 0; i < n; i += chunk) {
            for (const auto& body : numbered(i, i + chunk)) s.send(server::test::text_message(body));
            const auto outcomes = s.wait_outcomes(static_cast<size_t>(i + chunk));
            if (outcomes.size() < static_cast<size_t>(i + chunk)) return;
            accepted = outcomes.size();
        }
    });
    const bool some = client.run_until([&] { return client.received_count(r) >= 20; });
    client.take_credit_back(r);
    // The flow goes out now, and n2 has read it by the time it answers this
    // relayed attach.
    pn_link_t* probe = client.open_sender(queue + "-sync");
    const bool synced = client.run_until([&] { return client.remote_opened(probe); });
    paced.join();
    ASSERT_TRUE(some && synced) << client.error();
    ASSERT_EQ(accepted, static_cast<size_t>(n));
    s.close();

    std::string out;
    const auto code = run_tool({WHARF_WLM_PATH, "--metadata", cluster.metadata(), "move", queue, "n2", "--wait", "30"},
                               std::chrono::seconds(40), &out);
    ASSERT_EQ(code, std::optional<int>(0)) << out;
    ASSERT_TRUE(client.run_until([&] { return client.remote_closed(r); })) << client.error();
    EXPECT_STREQ(pn_condition_get_name(pn_link_remote_condition(r)), "amqp:link:redirect");

    std::vector<std::string> got = client.take_received_texts(r);
    const size_t first = got.size();
    ASSERT_LT(first, static_cast<size_t>(n)) << "every message reached the client before its flow";
    server::test::test_client at_new_owner(cluster.url(2));
    ASSERT_TRUE(at_new_owner.wait_open());
    auto rest = at_new_owner.open_receiver(queue, server::test::receiver_credit(n));
    for (const auto& m : rest.wait_messages(static_cast<size_t>(n) - first))
        got.push_back(proton::get<std::string>(m.msg.body()));
    rest.close();
    EXPECT_EQ(got.size(), static_cast<size_t>(n)) << first << " reached the first consumer";
    auto want = numbered(0, n);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "each message once, none lost";
}

} // namespace
} // namespace wharf::client::test
