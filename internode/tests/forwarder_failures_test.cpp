// The forwarder when things end: the broker goes away, the peer never
// speaks AMQP or resets the connection, nothing listens, or the forwarder is
// destroyed with messages pending. Every message is reported exactly once,
// broken() turns true, and later sends fail without being sent.

#include "broker/server/tests/wharfd_process.hpp"
#include "internode/tests/forwarder_test_support.hpp"

#include <memory>

namespace wharf::internode::test {
namespace {

using server::test::exit_check;
using server::test::wharfd_options;
using server::test::wharfd_process;
using clock = std::chrono::steady_clock;

// After the connection has ended, a send fails at once (off this thread).
void expect_later_send_fails(forwarder& fwd) {
    outcome_log later;
    fwd.send("q", encoded_message(0), later.callback(0));
    ASSERT_TRUE(later.wait_for_calls(1));
    EXPECT_TRUE(later.exactly_once(1));
    const auto out = later.outcomes(1)[0];
    EXPECT_EQ(out.result, forward_result::failed) << out;
    EXPECT_FALSE(out.description.empty());
}

// Every outcome of 0..n-1 is `failed` and its description contains `what`.
void expect_all_failed(outcome_log& log, size_t n, const std::string& what) {
    const auto outs = log.outcomes(n);
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(outs[i].result, forward_result::failed) << "message " << i << ": " << outs[i];
        EXPECT_NE(outs[i].description.find(what), std::string::npos)
            << "message " << i << ": " << outs[i];
    }
}

TEST(forwarder_failures, broker_stopping_mid_stream_reports_every_message_once_and_breaks) {
    wharfd_process broker(wharfd_options{.on_stop = exit_check::ignore});
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    outcome_log log;
    forwarder fwd(local_options(broker.port()));
    fwd.send("q", encoded_message(0), log.callback(0));
    ASSERT_TRUE(log.wait_for_calls(1));
    ASSERT_EQ(log.outcomes(1)[0].result, forward_result::accepted);

    constexpr size_t n = 5000;
    for (size_t i = 1; i < n; ++i) fwd.send("q", encoded_message(i, 2000), log.callback(i));
    broker.stop(); // SIGTERM: the broker closes our connection (amqp:connection:forced)

    ASSERT_TRUE(log.wait_for_calls(n)) << log.calls() << " of " << n << " reported";
    EXPECT_TRUE(log.exactly_once(n));
    size_t accepted = 0;
    for (const auto& o : log.outcomes(n)) {
        if (o.result == forward_result::accepted) ++accepted;
        else {
            EXPECT_EQ(o.result, forward_result::failed) << o;
            EXPECT_FALSE(o.description.empty());
        }
    }
    RecordProperty("accepted_before_stop", static_cast<int>(accepted));
    EXPECT_TRUE(eventually([&] { return fwd.broken(); })) << "broken() stayed false";
    EXPECT_EQ(fwd.in_flight(), 0u);
    expect_later_send_fails(fwd);
}

TEST(forwarder_failures, destroying_with_messages_never_sent_fails_them_and_returns_promptly) {
    silent_listener peer; // accepts TCP, never speaks AMQP: no open, no credit
    outcome_log log;
    auto opts = local_options(peer.port());
    opts.connect_timeout = 60s; // only the destructor ends this connection
    auto fwd = std::make_unique<forwarder>(opts);
    constexpr size_t n = 100;
    for (size_t i = 0; i < n; ++i) fwd->send("q", encoded_message(i), log.callback(i));
    ASSERT_TRUE(peer.accept_one()) << "the forwarder did not connect";
    EXPECT_EQ(fwd->in_flight(), n);
    EXPECT_FALSE(fwd->broken());
    EXPECT_EQ(log.calls(), 0u);

    const auto t0 = clock::now();
    fwd.reset();
    EXPECT_LT(clock::now() - t0, 5s) << "the destructor took too long";
    // All reported before the destructor returned.
    EXPECT_TRUE(log.exactly_once(n));
    expect_all_failed(log, n, "forwarder closed");
}

TEST(forwarder_failures, destroying_with_a_peer_that_hangs_after_open_waits_only_close_timeout) {
    silent_listener peer;
    outcome_log log;
    auto opts = local_options(peer.port());
    opts.connect_timeout = 60s;
    opts.close_timeout = 500ms;
    auto fwd = std::make_unique<forwarder>(opts);
    for (size_t i = 0; i < 3; ++i) fwd->send("q", encoded_message(i), log.callback(i));
    ASSERT_TRUE(peer.accept_one());
    ASSERT_TRUE(peer.open_then_hang()) << "the forwarder never took the peer's open";
    EXPECT_FALSE(fwd->broken());

    const auto t0 = clock::now();
    fwd.reset(); // sends close; no answer comes
    const auto took = clock::now() - t0;
    EXPECT_GE(took, 400ms) << "did not wait for the peer's close";
    EXPECT_LT(took, 5s) << "waited far longer than close_timeout";
    EXPECT_TRUE(log.exactly_once(3));
    expect_all_failed(log, 3, "forwarder closed");
}

TEST(forwarder_failures, destroying_while_the_broker_withholds_credit_fails_the_unaccepted) {
    wharfd_process broker(wharfd_options{.config_toml = "credit-window = 10\n"
                                                        "[[queue]]\nname = \"full\"\n"
                                                        "max-depth-messages = 5\n"
                                                        "overflow-policy = \"block\"\n"});
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    outcome_log log;
    auto fwd = std::make_unique<forwarder>(local_options(broker.port()));
    constexpr size_t n = 50;
    for (size_t i = 0; i < n; ++i) fwd->send("full", encoded_message(i), log.callback(i));
    // The queue fills; the rest wait for credit that does not come.
    ASSERT_TRUE(log.wait_for_calls(5)) << log.calls() << " reported";
    EXPECT_FALSE(fwd->broken());

    const auto t0 = clock::now();
    fwd.reset();
    EXPECT_LT(clock::now() - t0, 5s) << "the destructor took too long";
    EXPECT_TRUE(log.exactly_once(n));
    size_t accepted = 0, failed = 0;
    for (const auto& o : log.outcomes(n)) {
        if (o.result == forward_result::accepted) {
            ++accepted;
        } else {
            ++failed;
            EXPECT_EQ(o.result, forward_result::failed) << o;
            EXPECT_EQ(o.description, "forwarder closed") << o;
        }
    }
    EXPECT_GE(accepted, 5u);
    EXPECT_GE(failed, n - 10) << "more accepted than the queue and one credit window hold";
}

TEST(forwarder_failures, peer_that_never_opens_times_out_and_breaks) {
    silent_listener peer;
    outcome_log log;
    auto opts = local_options(peer.port());
    opts.connect_timeout = 300ms;
    forwarder fwd(opts);
    constexpr size_t n = 10;
    for (size_t i = 0; i < n; ++i) fwd.send("q", encoded_message(i), log.callback(i));
    ASSERT_TRUE(log.wait_for_calls(n, 10s)) << log.calls() << " reported";
    EXPECT_TRUE(log.exactly_once(n));
    expect_all_failed(log, n, "connect-timeout");
    EXPECT_TRUE(eventually([&] { return fwd.broken(); }));
    EXPECT_EQ(fwd.in_flight(), 0u);
    expect_later_send_fails(fwd);
}

TEST(forwarder_failures, connection_reset_by_the_peer_fails_everything_and_breaks) {
    silent_listener peer;
    outcome_log log;
    auto opts = local_options(peer.port());
    opts.connect_timeout = 60s;
    forwarder fwd(opts);
    constexpr size_t n = 10;
    for (size_t i = 0; i < n; ++i) fwd.send("q", encoded_message(i), log.callback(i));
    ASSERT_TRUE(peer.accept_one());
    peer.reset_accepted();
    ASSERT_TRUE(log.wait_for_calls(n)) << log.calls() << " reported";
    EXPECT_TRUE(log.exactly_once(n));
    expect_all_failed(log, n, ""); // with some description
    for (const auto& o : log.outcomes(n)) EXPECT_FALSE(o.description.empty());
    EXPECT_TRUE(eventually([&] { return fwd.broken(); }));
    expect_later_send_fails(fwd);
}

TEST(forwarder_failures, nothing_listening_fails_every_send_and_breaks) {
    refused_port nobody;
    outcome_log log;
    forwarder fwd(local_options(nobody.port()));
    constexpr size_t n = 10;
    for (size_t i = 0; i < n; ++i) fwd.send("q", encoded_message(i), log.callback(i));
    ASSERT_TRUE(log.wait_for_calls(n)) << log.calls() << " reported";
    EXPECT_TRUE(log.exactly_once(n));
    const auto outs = log.outcomes(n);
    for (const auto& o : outs) {
        EXPECT_EQ(o.result, forward_result::failed) << o;
        EXPECT_FALSE(o.description.empty());
    }
    EXPECT_TRUE(eventually([&] { return fwd.broken(); }));
    EXPECT_EQ(fwd.in_flight(), 0u);
    expect_later_send_fails(fwd);
}

} // namespace
} // namespace wharf::internode::test
