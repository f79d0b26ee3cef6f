// wharf-bench against a real wharfd: what its JSON reports is what moved.

#include "broker/common/testing/run_tool.hpp"
#include "broker/server/tests/wharfd_process.hpp"
#include "client/tests/mini_broker.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace wharf::bench::test {
namespace {

using wharf::server::test::wharfd_process;
using wharf::test_support::run_tool;

// Runs wharf-bench with --json --quiet; its report (a failed test if it
// exited non-zero or printed no JSON).
nlohmann::json bench(std::vector<std::string> args) {
    args.insert(args.begin(), WHARF_BENCH_PATH);
    args.insert(args.end(), {"--json", "--quiet", "--timeout", "20"});
    std::string out;
    const auto code = run_tool(args, std::chrono::seconds(60), &out);
    EXPECT_EQ(code, std::optional<int>(0)) << out;
    const auto at = out.find('{');
    if (at == std::string::npos) {
        ADD_FAILURE() << "no JSON report: " << out;
        return nlohmann::json::object();
    }
    return nlohmann::json::parse(out.substr(at), nullptr, false);
}

// `receive --drain-idle` ends once nothing came for that long: it takes all
// a queue holds. It used to end early at random (a link's thread stamped a
// message after the monitor read the clock, and the difference wrapped
// around to "idle for ages"), which made drain figures too low.
TEST(wharf_bench, receive_with_drain_idle_takes_everything_the_queue_holds) {
    wharfd_process node;
    ASSERT_TRUE(node.listening()) << node.stderr_text();
    constexpr int count = 100000;
    for (int round = 0; round < 3; ++round) {
        const std::string queue = "drain-idle-" + std::to_string(round);
        const auto sent = bench({"send", "--url", node.url(), "--address", queue, "--count", std::to_string(count)});
        ASSERT_EQ(sent.value("accepted", 0), count) << sent.dump();
        const auto got = bench({"receive", "--url", node.url(), "--address", queue, "--drain-idle", "0.5"});
        EXPECT_EQ(got.value("received", 0), count) << "round " << round << ": " << got.dump();
        // Nothing was left behind for a later consumer.
        const auto rest = bench({"receive", "--url", node.url(), "--address", queue, "--drain-idle", "0.2"});
        EXPECT_EQ(rest.value("received", -1), 0) << "round " << round << ": " << rest.dump();
    }
}

// Many links on several connections, counted per thread: the totals are
// every link's, a count run stops at its count, and a duration run reports
// its steady rate once every link attached.
TEST(wharf_bench, pair_over_many_links_counts_every_message) {
    wharfd_process node;
    ASSERT_TRUE(node.listening()) << node.stderr_text();
    constexpr int count = 30000;
    const auto counted = bench({"pair", "--url", node.url(), "--address", "many", "--connections", "3", "--links",
                                "40", "--queues", "60", "--count", std::to_string(count)});
    EXPECT_EQ(counted.value("sent", 0), count) << counted.dump();
    EXPECT_EQ(counted.value("accepted", 0), count) << counted.dump();
    EXPECT_EQ(counted.value("received", 0), count) << counted.dump();

    const auto timed = bench({"pair", "--url", node.url(), "--address", "timed", "--connections", "2", "--links",
                              "50", "--queues", "100", "--duration", "1"});
    EXPECT_GT(timed.value("received", 0), 0) << timed.dump();
    EXPECT_EQ(timed.value("received", 0), timed.value("accepted", -1)) << timed.dump();
    EXPECT_GT(timed.value("steady_per_s", 0.0), 0.0) << timed.dump();
}

// pair and latency count only the messages of their own run: what earlier
// runs left on the queue is taken off, reported as foreign, and neither
// counted as received nor timed. They used to count it (send 5000, then
// pair 500: received 1400, with their own 500 still on the queue).
TEST(wharf_bench, pair_and_latency_count_only_their_own_messages) {
    wharfd_process node;
    ASSERT_TRUE(node.listening()) << node.stderr_text();
    for (const std::string& mode : std::vector<std::string>{"pair", "latency"}) {
        SCOPED_TRACE(mode);
        const std::string queue = "leftover-" + mode;
        const auto left = bench({"send", "--url", node.url(), "--address", queue, "--count", "2000"});
        ASSERT_EQ(left.value("accepted", 0), 2000) << left.dump();
        const int count = mode == "pair" ? 500 : 50;
        const auto run = bench({mode, "--url", node.url(), "--address", queue, "--count", std::to_string(count)});
        EXPECT_EQ(run.value("accepted", 0), count) << run.dump();
        EXPECT_EQ(run.value("received", 0), count) << run.dump();
        EXPECT_EQ(run.value("foreign", 0), 2000) << run.dump();
        ASSERT_TRUE(run["latency"].is_object()) << run.dump();
        EXPECT_EQ(run["latency"].value("samples", 0), count) << run.dump();
        // Its own messages were all taken: nothing is left behind.
        const auto rest = bench({"receive", "--url", node.url(), "--address", queue, "--drain-idle", "0.2"});
        EXPECT_EQ(rest.value("received", -1), 0) << rest.dump();
    }
}

// latency --at-most-once through a broker that drops every third message:
// a pair whose message never arrives goes on after --drain-idle, and the run
// ends and reports the loss. The pair used to wait for ever (the run failed
// with "no progress" after --timeout).
TEST(wharf_bench, latency_at_most_once_goes_on_after_a_lost_message) {
    wharf::client::test::mini_broker_options o;
    o.drop_every = 3;
    wharf::client::test::mini_broker broker(o);
    ASSERT_NE(broker.port(), 0);
    const auto run = bench({"latency", "--url", broker.url(), "--address", "lossy", "--at-most-once", "--count", "30",
                            "--drain-idle", "0.2"});
    EXPECT_EQ(run.value("sent", 0), 30) << run.dump();
    EXPECT_EQ(run.value("received", 0), 20) << run.dump();
    EXPECT_EQ(run.value("lost", 0), 10) << run.dump();
    EXPECT_EQ(broker.dropped(), 10);
    EXPECT_TRUE(run.value("ok", false)) << run.dump();
}

// --property puts the property on every message sent, and --selector
// makes the receivers select by it: what a selector does not select stays.
TEST(wharf_bench, a_receiver_with_a_selector_takes_only_what_it_selects) {
    wharfd_process node;
    ASSERT_TRUE(node.listening()) << node.stderr_text();
    for (const char* colour : {"colour=red", "colour=blue", "colour=red"}) {
        const auto sent = bench({"send", "--url", node.url(), "--address", "paint", "--property", colour, "--count", "100"});
        ASSERT_EQ(sent.value("accepted", 0), 100) << sent.dump();
    }
    const auto reds = bench({"receive", "--url", node.url(), "--address", "paint", "--selector", "colour = 'red'",
                             "--drain-idle", "0.5"});
    EXPECT_EQ(reds.value("received", 0), 200) << reds.dump();
    const auto rest = bench({"receive", "--url", node.url(), "--address", "paint", "--drain-idle", "0.5"});
    EXPECT_EQ(rest.value("received", 0), 100) << "the blue messages did not stay: " << rest.dump();
}

} // namespace
} // namespace wharf::bench::test
