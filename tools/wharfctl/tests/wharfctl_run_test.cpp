// The built wharfctl against a scripted AMQP peer: what a user sees when the
// node refuses a request.

#include "broker/common/testing/run_tool.hpp"
#include "client/tests/mini_broker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace wharf::ctl::test {
namespace {

using wharf::client::test::mini_broker;
using wharf::client::test::mini_broker_options;
using wharf::test_support::run_tool;

// `wharfctl query queue` against a mini_broker with `o`: it must fail at
// once (well within its --timeout of 30 s), exit 1, printing `expected`
// after "wharfctl: HOST:PORT refused the request: ".
void expect_refused_at_once(const mini_broker_options& o, const std::string& expected) {
    mini_broker node(o);
    ASSERT_NE(node.port(), 0);
    std::string out;
    const auto started = std::chrono::steady_clock::now();
    const auto code = run_tool({WHARFCTL_PATH, "-b", node.url(), "--timeout", "30", "query", "queue"},
                               std::chrono::seconds(50), &out);
    EXPECT_EQ(code, std::optional<int>(1)) << out;
    EXPECT_NE(out.find("wharfctl: " + node.url() + " refused the request: " + expected), std::string::npos) << out;
    EXPECT_EQ(out.find("no answer"), std::string::npos) << out;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << out;
}

// A request the node rejects fails at once, with the node's condition and
// exit 1. It used to wait out --timeout and report "no answer" (exit 3).
TEST(wharfctl, a_rejected_request_fails_at_once_with_the_nodes_condition) {
    mini_broker_options o;
    o.reject_address = "$management";
    o.reject_condition = "amqp:invalid-field";
    o.reject_description = "reply-to 'x' is a queue of node n2, not of this node";
    expect_refused_at_once(o, "amqp:invalid-field: reply-to 'x' is a queue of node n2, not of this node");
}

// So does one it gives back unrun (released): it too waited out --timeout.
TEST(wharfctl, a_released_request_fails_at_once_saying_it_did_not_run) {
    mini_broker_options o;
    o.release_first = true; // the first message it gets is the request
    expect_refused_at_once(o, "amqp:released: the node did not run it (sending it again is safe)");
}

// A time given as NaN is a usage error, as -1 is: --timeout nan failed as
// "no connection within -9223372036854775808 ms" (exit 3), and move --wait
// nan started the move before it failed.
TEST(wharfctl, seconds_that_are_not_a_number_are_usage_errors) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{WHARFCTL_PATH, "-b", "127.0.0.1:1", "--timeout", "nan", "status"},
          std::vector<std::string>{WHARFCTL_PATH, "-b", "127.0.0.1:1", "move", "q", "n2", "--wait", "nan"}}) {
        std::string out;
        EXPECT_EQ(run_tool(args, std::chrono::seconds(20), &out), std::optional<int>(2)) << out;
        EXPECT_NE(out.find("'nan' is not between 0"), std::string::npos) << out;
    }
}

} // namespace
} // namespace wharf::ctl::test
