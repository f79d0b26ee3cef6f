// Consumers: deliveries only within credit, FIFO, drain, competing consumers.

#include "broker/server/tests/component_test.hpp"
#include "broker/server/tests/raw_peer.hpp"

#include <proton/codec/encoder.hpp>
#include <proton/codec/vector.hpp>
#include <proton/map.hpp>
#include <proton/message.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>

#include <algorithm>
#include <chrono>
#include <set>

namespace wharf::server::test {
namespace {

class consumers : public component_test {};

TEST_F(consumers, no_more_deliveries_than_credit_then_the_rest_in_order) {
    start_broker();
    auto c = connect();
    send_texts(*c, "credit3", 10);
    test_receiver r = c->open_receiver("credit3", receiver_credit(0));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    r.add_credit(3);
    EXPECT_EQ(bodies(r.wait_messages(3)), expected_texts(0, 3));
    sync_with_broker(*c); // anything sent beyond the credit has arrived by now
    EXPECT_EQ(r.message_count(), 3u) << "more deliveries than the 3 credits granted";
    EXPECT_EQ(r.credit(), 0);
    r.add_credit(7);
    EXPECT_EQ(bodies(r.wait_messages(10)), expected_texts(0, 10));
    r.settle_all(settle_as::accept);
}

TEST_F(consumers, drain_uses_up_credit_and_finishes_with_zero) {
    start_broker();
    auto c = connect();
    send_texts(*c, "drainq", 3);
    test_receiver r = c->open_receiver("drainq", receiver_credit(0));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    r.add_credit(10);
    EXPECT_EQ(bodies(r.wait_messages(3)), expected_texts(0, 3));
    r.drain();
    auto left = r.wait_drain_finished();
    ASSERT_TRUE(left.has_value()) << "no drain-finish within the deadline";
    EXPECT_EQ(*left, 0);
    EXPECT_EQ(r.credit(), 0);
    EXPECT_EQ(r.message_count(), 3u);
}

TEST_F(consumers, drain_on_an_empty_queue_returns_all_credit) {
    start_broker();
    auto c = connect();
    test_receiver r = c->open_receiver("drain-empty", receiver_credit(0));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    r.add_credit(5);
    r.drain();
    auto left = r.wait_drain_finished();
    ASSERT_TRUE(left.has_value()) << "no drain-finish within the deadline";
    EXPECT_EQ(*left, 0);
    // After the drain, new credit works again.
    r.add_credit(1);
    send_texts(*c, "drain-empty", 1);
    EXPECT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
}

TEST_F(consumers, competing_consumers_share_messages_evenly) {
    start_broker();
    auto ca = connect();
    auto cb = connect();
    // Credit of 50 each, granted once: however the threads are scheduled,
    // neither can take more than half, and round robin gives each its half.
    proton::receiver_options auto_accept;
    auto_accept.credit_window(0).auto_accept(true);
    test_receiver a = ca->open_receiver("shared", auto_accept);
    test_receiver b = cb->open_receiver("shared", auto_accept);
    ASSERT_TRUE(a.wait_open()) << a.wait_error();
    ASSERT_TRUE(b.wait_open()) << b.wait_error();
    a.add_credit(50);
    b.add_credit(50);
    // Both consumers' credit reached the broker before any message does.
    sync_with_broker(*ca);
    sync_with_broker(*cb);
    auto p = connect();
    send_texts(*p, "shared", 100);
    ASSERT_TRUE(eventually([&] { return a.message_count() + b.message_count() >= 100; }))
        << "a got " << a.message_count() << ", b got " << b.message_count();
    auto got_a = bodies(a.messages());
    auto got_b = bodies(b.messages());
    EXPECT_EQ(got_a.size(), 50u) << "a got " << got_a.size() << ", b got " << got_b.size();
    EXPECT_EQ(got_b.size(), 50u) << "a got " << got_a.size() << ", b got " << got_b.size();
    EXPECT_EQ(got_a.size() + got_b.size(), 100u);
    // Each consumer sees its share in queue order; together exactly once each.
    std::vector<std::string> all = got_a;
    all.insert(all.end(), got_b.begin(), got_b.end());
    std::sort(all.begin(), all.end());
    auto want = expected_texts(0, 100);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(all, want);
    auto index = [](const std::string& s) { return std::stoi(s.substr(1)); };
    for (size_t i = 1; i < got_a.size(); ++i) EXPECT_LT(index(got_a[i - 1]), index(got_a[i]));
    for (size_t i = 1; i < got_b.size(); ++i) EXPECT_LT(index(got_b[i - 1]), index(got_b[i]));
}

// An at-most-once consumer may take its credit back at any time (AMQP lets a
// receiver lower its link-credit). Whatever the node had taken from the
// queue for it but not yet sent must stay in the queue for the next
// consumer. Before, the node held those messages for the link, already
// gone from the queue, and lost them when the link ended.
//
// Whether a message is on its way to the link when the credit goes back is
// a matter of timing (messages are still arriving then), so the test runs
// several rounds: with the old behaviour about one run of ten rounds in two lost
// messages. A round where the node sent everything first shows nothing
// and is not counted.
TEST_F(consumers, presettled_messages_never_sent_stay_queued) {
    start_broker();
    constexpr int n = 3000, rounds = 20;
    auto p = connect();
    int shown = 0;
    for (int round = 0; round < rounds; ++round) {
        const std::string q = "amo-takeback-" + std::to_string(round);
        raw_peer client(broker().url());
        pn_link_t* r = client.open_receiver(q, 2 * n, /*presettled=*/true, /*top_up=*/false);
        ASSERT_TRUE(client.run_until([&] { return client.remote_opened(r); })) << client.error();
        test_sender s = p->open_sender(q);
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        for (int i = 0; i < n; ++i) s.send(text_message("m" + std::to_string(i)));
        ASSERT_TRUE(client.run_until([&] { return client.received_count(r) >= 20; })) << client.error();
        client.take_credit_back(r);
        // Two attach round trips: the node has read the flow, and sent what
        // it sent before it, by the time both are answered.
        for (int i = 0; i < 2; ++i) {
            pn_link_t* probe = client.open_sender(q + "-sync" + std::to_string(i));
            ASSERT_TRUE(client.run_until([&] { return client.remote_opened(probe); })) << client.error();
        }
        client.close(r);
        ASSERT_TRUE(client.run_until([&] { return client.remote_closed(r); })) << client.error();
        ASSERT_EQ(s.wait_outcomes(n).size(), static_cast<size_t>(n));
        s.close();

        std::vector<std::string> got = client.take_received_texts(r);
        const size_t first = got.size();
        if (first == static_cast<size_t>(n)) continue; // all sent before the flow came
        ++shown;
        test_receiver rest = p->open_receiver(q, receiver_credit(n));
        for (const auto& m : rest.wait_messages(static_cast<size_t>(n) - first)) got.push_back(body_of(m));
        rest.close();
        EXPECT_EQ(got.size(), static_cast<size_t>(n)) << "round " << round << ": " << first << " reached the first consumer";
        auto want = expected_texts(0, n);
        std::sort(got.begin(), got.end());
        std::sort(want.begin(), want.end());
        ASSERT_EQ(got, want) << "round " << round << ": each message once, none lost";
    }
    RecordProperty("rounds_that_showed_something", shown);
}

// A source filter-set of one entry `name`: a described value.
template <class Descriptor, class Value>
proton::receiver_options with_filter(const std::string& name, Descriptor descriptor, const Value& value,
                                     int credit = 10) {
    proton::value described;
    proton::codec::encoder enc(described);
    enc << proton::codec::start::described() << descriptor << value << proton::codec::finish();
    proton::source::filter_map filters;
    filters.put(proton::symbol(name), described);
    return receiver_credit(credit).source(proton::source_options().filters(filters));
}

// A JMS selector as Proton's receive_selector example sends it (named
// "selector", a symbol descriptor); Qpid JMS and rhea name it
// "jms-selector" and use the descriptor's code.
proton::receiver_options with_selector(const std::string& selector, int credit = 10) {
    return with_filter("selector", proton::symbol("apache.org:selector-filter:string"), selector, credit);
}
proton::receiver_options with_jms_selector(const std::string& selector, int credit = 10) {
    return with_filter("jms-selector", uint64_t{0x0000468C00000004ULL}, selector, credit);
}

void send_coloured(test_client& c, const std::string& address, const std::vector<std::string>& colours) {
    test_sender s = c.open_sender(address);
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    for (size_t i = 0; i < colours.size(); ++i) {
        proton::message m = text_message(colours[i] + std::to_string(i));
        m.properties().put("colour", colours[i]);
        s.send(m);
    }
    auto outs = s.wait_outcomes(colours.size());
    ASSERT_EQ(outs.size(), colours.size());
}

// A consumer with a selector gets only what it selects, in order; what it
// does not select stays for the queue's other consumers; the answer's
// source says the selector is in place.
TEST_F(consumers, a_selector_gives_a_consumer_only_the_messages_it_selects) {
    start_broker();
    auto c = connect();
    send_coloured(*c, "colours", {"red", "blue", "red", "green", "red"});
    test_receiver reds = c->open_receiver("colours", with_selector("colour = 'red'"));
    ASSERT_TRUE(reds.wait_open()) << reds.wait_error();
    EXPECT_EQ(reds.remote_source_filters(), std::vector<std::string>{"selector"});
    EXPECT_EQ(bodies(reds.wait_messages(3)), (std::vector<std::string>{"red0", "red2", "red4"}));
    reds.settle_all(settle_as::accept);
    test_receiver rest = c->open_receiver("colours", with_jms_selector("colour IN ('blue', 'green')", 1));
    EXPECT_EQ(bodies(rest.wait_messages(2)), (std::vector<std::string>{"blue1", "green3"}));
    rest.settle_all(settle_as::accept);
    // Sent after the selecting consumer attached: still only its own.
    send_coloured(*c, "colours", {"blue", "red"});
    EXPECT_EQ(bodies(reds.wait_messages(4)), (std::vector<std::string>{"red0", "red2", "red4", "red1"}));
    EXPECT_EQ(bodies(rest.wait_messages(3)), (std::vector<std::string>{"blue1", "green3", "blue0"}));
}

// A consumer of retried orders only: JMSType is properties.subject (where
// Qpid JMS puts it), and JMSXDeliveryCount counts the queue's failed
// deliveries, so a modified(delivery-failed) counts and a release does not.
TEST_F(consumers, a_selector_on_jms_type_and_delivery_count_takes_only_failed_orders) {
    start_broker();
    auto c = connect();
    {
        test_sender s = c->open_sender("work");
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        const std::vector<std::string> types = {"order", "invoice", "order"};
        for (size_t i = 0; i < types.size(); ++i) {
            proton::message m = text_message(types[i] + std::to_string(i));
            m.subject(types[i]);
            s.send(m);
        }
        ASSERT_EQ(s.wait_outcomes(types.size()).size(), types.size());
    }
    test_receiver retries = c->open_receiver("work", with_jms_selector("JMSType = 'order' AND JMSXDeliveryCount > 1"));
    ASSERT_TRUE(retries.wait_open()) << retries.wait_error();
    test_receiver first = c->open_receiver("work", receiver_credit(0));
    ASSERT_TRUE(first.wait_open()) << first.wait_error();
    first.add_credit(3);
    EXPECT_EQ(bodies(first.wait_messages(3)), (std::vector<std::string>{"order0", "invoice1", "order2"}));
    first.settle(0, settle_as::modified_failed); // an order that failed: a retry
    first.settle(1, settle_as::modified_failed); // failed, but not an order
    first.settle(2, settle_as::release);         // not a failure
    auto retried = retries.wait_messages(1);
    ASSERT_EQ(bodies(retried), std::vector<std::string>{"order0"});
    EXPECT_EQ(retried[0].msg.delivery_count(), 1u);
    first.add_credit(2);
    EXPECT_EQ(bodies(first.wait_messages(5)),
              (std::vector<std::string>{"order0", "invoice1", "order2", "invoice1", "order2"}));
    EXPECT_EQ(retries.message_count(), 1u) << "the selector took an invoice or an unfailed order";
}

// A consumer whose link ends while it holds a message unsettled failed that
// delivery: the message comes back with its delivery count raised, so a
// selector on JMSXDeliveryCount sees the second delivery.
TEST_F(consumers, a_link_that_ends_holding_a_message_counts_a_failed_delivery_for_selectors) {
    start_broker();
    auto c = connect();
    {
        test_sender s = c->open_sender("held");
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        s.send(text_message("m0"));
        ASSERT_EQ(s.wait_outcomes(1).size(), 1u);
    }
    test_receiver retries = c->open_receiver("held", with_jms_selector("JMSXDeliveryCount = 2"));
    ASSERT_TRUE(retries.wait_open()) << retries.wait_error();
    test_receiver first = c->open_receiver("held", receiver_credit(1));
    EXPECT_EQ(bodies(first.wait_messages(1)), std::vector<std::string>{"m0"});
    EXPECT_EQ(retries.message_count(), 0u) << "a first delivery counts 1";
    first.close(); // holding m0 unsettled
    auto again = retries.wait_messages(1);
    ASSERT_EQ(bodies(again), std::vector<std::string>{"m0"});
    EXPECT_EQ(again[0].msg.delivery_count(), 1u);
}

// JMSExpiration is when the queue expires the message, in ms since the
// epoch (its ttl from arrival, or its absolute-expiry-time if sooner), and 0
// for a message that never expires: as ActiveMQ Artemis reads it.
TEST_F(consumers, a_selector_on_jms_expiration_tells_expiring_messages_from_lasting_ones) {
    start_broker();
    auto c = connect();
    const int64_t sent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    {
        test_sender s = c->open_sender("expiring");
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        for (int i = 0; i < 3; ++i) {
            proton::message m = text_message("m" + std::to_string(i));
            if (i == 1) m.ttl(proton::duration(3600 * 1000));
            s.send(m);
        }
        ASSERT_EQ(s.wait_outcomes(3).size(), 3u);
    }
    const std::string in_an_hour = "JMSExpiration BETWEEN " + std::to_string(sent_ms + 3600 * 1000) + " AND " +
                                   std::to_string(sent_ms + 3660 * 1000);
    test_receiver expiring = c->open_receiver("expiring", with_jms_selector(in_an_hour));
    EXPECT_EQ(bodies(expiring.wait_messages(1)), std::vector<std::string>{"m1"});
    test_receiver lasting = c->open_receiver("expiring", with_jms_selector("JMSExpiration = 0"));
    EXPECT_EQ(bodies(lasting.wait_messages(2)), (std::vector<std::string>{"m0", "m2"}));
    EXPECT_EQ(expiring.message_count(), 1u) << "a message that never expires was selected as expiring";
}

TEST_F(consumers, a_selector_that_does_not_parse_is_refused_with_invalid_field) {
    start_broker();
    auto c = connect();
    test_receiver r = c->open_receiver("colours", with_selector("colour = 'red"));
    expect_condition(r.wait_error(), "amqp:invalid-field", "a string that never ends");
    test_receiver number = c->open_receiver(
        "colours", with_filter("selector", proton::symbol("apache.org:selector-filter:string"), 42));
    expect_condition(number.wait_error(), "amqp:invalid-field", "holds no string");
}

TEST_F(consumers, two_selectors_in_one_filter_set_are_refused_with_not_implemented) {
    start_broker();
    auto c = connect();
    proton::source::filter_map filters;
    for (const char* name : {"one", "two"}) {
        proton::value described;
        proton::codec::encoder enc(described);
        enc << proton::codec::start::described() << proton::symbol("apache.org:selector-filter:string")
            << std::string("colour = 'red'") << proton::codec::finish();
        filters.put(proton::symbol(name), described);
    }
    test_receiver r =
        c->open_receiver("colours", receiver_credit(10).source(proton::source_options().filters(filters)));
    expect_condition(r.wait_error(), "amqp:not-implemented", "a second selector");
}

// Any other filter is refused rather than echoed: echoed, it would say it
// is in place, and the consumer would take every message of the queue.
TEST_F(consumers, another_source_filter_is_refused_with_not_implemented_naming_it) {
    start_broker();
    auto c = connect();
    send_texts(*c, "filtered", 1);
    test_receiver r = c->open_receiver(
        "filtered", with_filter("no-local", proton::symbol("apache.org:no-local-filter:list"), std::vector<std::string>{}));
    expect_condition(r.wait_error(), "amqp:not-implemented", "'no-local' (apache.org:no-local-filter:list)");
    EXPECT_EQ(r.message_count(), 0u);
    test_receiver plain = c->open_receiver("filtered", receiver_credit(10));
    EXPECT_EQ(bodies(plain.wait_messages(1)), expected_texts(0, 1)) << "the message did not stay for others";
    plain.settle_all(settle_as::accept);
}

} // namespace
} // namespace wharf::server::test
