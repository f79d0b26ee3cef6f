// examples/redirect_client.cpp (wharf-example-redirect) against a 2-node
// cluster: started at n1, it is served by n2 and gets its messages back.

#include "client/tests/cluster_fixture.hpp"
#include "client/tests/mini_broker.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wharf::client::test {
namespace {

TEST(redirect_example, sends_and_receives_through_a_non_owner) {
    two_node_cluster cluster;
    ASSERT_TRUE(cluster.ok());
    std::string out;
    const auto code = run_tool({WHARF_EXAMPLE_PATH, "--url", cluster.url(1), "--address", "example-q", "--count", "7",
                                "--timeout", "20"},
                               std::chrono::seconds(30), &out);
    ASSERT_EQ(code, std::optional<int>(0)) << out;
    EXPECT_NE(out.find("received 7 of 7 (0 duplicate(s)); queue 'example-q' served by node n2 at " + cluster.url(2)),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("node n1 (" + cluster.url(1) + ") redirected to " + cluster.url(2)), std::string::npos)
        << out;
}

TEST(redirect_example, fails_clearly_when_no_node_answers) {
    std::string out;
    const auto code = run_tool({WHARF_EXAMPLE_PATH, "--url", "127.0.0.1:" + std::to_string(free_port()), "--count",
                                "1", "--timeout", "20"},
                               std::chrono::seconds(30), &out);
    EXPECT_EQ(code, std::optional<int>(1)) << out;
    EXPECT_NE(out.find("wharf-example-redirect: "), std::string::npos) << out;
}

// The broker releases the first message (the sender still has credit) and
// delivers the next one twice: the example sends the released one again at
// once, and "received" counts each message once, so it ends only when all
// three came. It used to wait for an on_sendable that never came (a
// time-out), and to count the copy as one of the three.
TEST(redirect_example, a_released_message_is_sent_again_at_once_and_counted_once) {
    mini_broker_options o;
    o.release_first = true;
    o.duplicate_first = true;
    mini_broker broker(o);
    ASSERT_NE(broker.port(), 0);
    std::string out;
    const auto code = run_tool({WHARF_EXAMPLE_PATH, "--url", broker.url(), "--address", "dup-q", "--count", "3",
                                "--timeout", "20"},
                               std::chrono::seconds(30), &out);
    ASSERT_EQ(code, std::optional<int>(0)) << out;
    EXPECT_NE(out.find("sent 3, confirmed 3, received 3 of 3 (1 duplicate(s)); queue 'dup-q' served by node "
                       "mini-broker"),
              std::string::npos)
        << out;
}

} // namespace
} // namespace wharf::client::test
