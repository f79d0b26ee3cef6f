#include "broker/engine/tests/engine_fixture.hpp"

namespace wharf::engine::testing {
namespace {

using strings = std::vector<std::string>;

TEST(queue_engine, fifo_within_credit) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b", "c"});
    auto pub = f.out->take<ev_published>();
    ASSERT_EQ(pub.size(), 1u);
    EXPECT_EQ(pub[0].count, 3u);
    EXPECT_TRUE(pub[0].failures.empty());

    auto c = f.consumer("q", 2);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"a", "b"}));
    f.engine->post(cmd_credit{c, 10, false});
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"c"}));
}

TEST(queue_engine, queue_created_by_consumer_first) {
    engine_fixture f;
    auto c = f.consumer("orders", 10);
    auto att = f.out->take<ev_attached>();
    ASSERT_EQ(att.size(), 1u);
    EXPECT_FALSE(att[0].err);
    EXPECT_EQ(att[0].link, c);
    auto p = f.producer("orders");
    f.publish(p, {"x"});
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"x"}));
}

TEST(queue_engine, auto_create_off_refuses_unknown_address) {
    config::queue_declaration known{"known", {}};
    engine_fixture f({.auto_create = false, .queues = {known}});
    f.consumer("nope", 1);
    f.producer("known");
    auto att = f.out->take<ev_attached>();
    ASSERT_EQ(att.size(), 2u);
    ASSERT_TRUE(att[0].err);
    EXPECT_EQ(att[0].err->code, errc::not_found);
    EXPECT_NE(att[0].err->description.find("nope"), std::string::npos);
    EXPECT_FALSE(att[1].err);
}

// A queue's name fits the journal's 16-bit length: a longer address is
// refused (attach and anonymous `to` alike), the longest is taken.
TEST(queue_engine, an_address_longer_than_a_queue_name_is_refused) {
    engine_fixture f;
    const std::string longest(max_queue_name, 'q');
    const std::string too_long(max_queue_name + 1, 'q');
    f.consumer(too_long, 1);
    f.producer(longest);
    auto att = f.out->take<ev_attached>();
    ASSERT_EQ(att.size(), 2u);
    ASSERT_TRUE(att[0].err);
    EXPECT_EQ(att[0].err->code, errc::invalid_field);
    EXPECT_NE(att[0].err->description.find("65536 bytes long; a queue's name is at most 65535"),
              std::string::npos)
        << att[0].err->description;
    EXPECT_FALSE(att[1].err);

    auto anon = f.producer("");
    cmd_publish pub{anon, {}};
    pub.messages.push_back(engine_fixture::msg("1", too_long));
    pub.messages.push_back(engine_fixture::msg("2", longest));
    f.engine->post(std::move(pub));
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].failures.size(), 1u);
    EXPECT_EQ(r[0].failures[0].index, 0u);
    EXPECT_EQ(r[0].failures[0].err.code, errc::invalid_field);
    EXPECT_FALSE(f.has_queue(too_long));
    EXPECT_EQ(f.stats(longest).depth, 1u);
}

// An anonymous `to` (or an attach's address) with a NUL or bytes that are
// not UTF-8 made a queue no client could attach to: Proton's termini are C
// strings ("a\0b" attached to "a"), and no tool could name it. Refused.
TEST(queue_engine, an_address_that_no_client_could_name_is_refused) {
    engine_fixture f;
    auto anon = f.producer("");
    cmd_publish pub{anon, {}};
    pub.messages.push_back(engine_fixture::msg("1", std::string("a\0b", 3)));
    pub.messages.push_back(engine_fixture::msg("2", "\xff\xfe"));
    f.engine->post(std::move(pub));
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].failures.size(), 2u);
    EXPECT_EQ(r[0].failures[0].err.code, errc::invalid_field);
    EXPECT_NE(r[0].failures[0].err.description.find("control character"), std::string::npos);
    EXPECT_NE(r[0].failures[1].err.description.find("not UTF-8"), std::string::npos);
    EXPECT_FALSE(f.has_queue(std::string("a\0b", 3)));
    EXPECT_FALSE(f.has_queue("\xff\xfe"));
}

TEST(queue_engine, drain_answers_when_nothing_left) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b"});
    auto c = f.consumer("q");
    f.engine->post(cmd_credit{c, 5, true});
    EXPECT_EQ(f.deliveries().size(), 2u);
    auto drained = f.out->take<ev_drained>();
    ASSERT_EQ(drained.size(), 1u);
    EXPECT_EQ(drained[0].link, c);
    f.publish(p, {"c"});
    EXPECT_TRUE(f.deliveries().empty()) << "drained credit is used up";
}

TEST(queue_engine, competing_consumers_share_fairly) {
    engine_fixture f;
    auto c1 = f.consumer("q", 100);
    auto c2 = f.consumer("q", 100);
    auto p = f.producer("q");
    strings bodies;
    for (int i = 0; i < 10; ++i) bodies.push_back(std::to_string(i));
    f.publish(p, bodies);
    auto ds = f.deliveries();
    ASSERT_EQ(ds.size(), 10u);
    int n1 = 0, n2 = 0;
    for (auto& d : ds) (d.link == c1 ? n1 : n2)++;
    EXPECT_EQ(n1, 5);
    EXPECT_EQ(n2, 5);
    (void)c2;
}

TEST(queue_engine, accepted_removes_released_returns_to_its_place) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b", "c"});
    auto c = f.consumer("q", 2);
    auto ds = f.deliveries();
    ASSERT_EQ(ds.size(), 2u);
    f.settle(c, ds[0].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.settle(c, ds[1].seq, outcome_kind::released);
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.engine->post(cmd_credit{c, 4, false});
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"b", "c"})) << "released b goes back before c";
    EXPECT_EQ(again[0].delivery_count, 0u) << "released does not count a delivery";
    EXPECT_TRUE(again[0].redelivered);
    EXPECT_FALSE(again[1].redelivered);
}

TEST(queue_engine, modified_failed_counts_undeliverable_skips_that_link) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a"});
    auto c1 = f.consumer("q", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    f.settle(c1, d[0].seq, outcome_kind::modified_failed);
    d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].delivery_count, 1u);
    f.settle(c1, d[0].seq, outcome_kind::modified_undeliverable);
    EXPECT_TRUE(f.deliveries().empty()) << "never again to the link that said undeliverable-here";
    auto c2 = f.consumer("q", 10);
    d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].link, c2);
    EXPECT_EQ(d[0].delivery_count, 1u);
}

TEST(queue_engine, rejected_goes_to_dead_letter_queue) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"bad"});
    auto c = f.consumer("q", 1);
    auto d = f.deliveries();
    f.settle(c, d[0].seq, outcome_kind::rejected);
    EXPECT_EQ(f.stats("q").depth, 0u);
    EXPECT_EQ(f.stats("DLQ").depth, 1u);
    EXPECT_EQ(f.stats("q").counters.dead_lettered, 1u);
    f.consumer("DLQ", 1);
    auto dead = f.deliveries();
    EXPECT_EQ(f.bodies(dead), (strings{"bad"}));
    ASSERT_EQ(dead.size(), 1u);
    EXPECT_TRUE(dead[0].redelivered) << "first-acquirer must be false: the rejecting link acquired it";
}

TEST(queue_engine, per_queue_dead_letter_queue_and_drop) {
    config::queue_policy to_errors;
    to_errors.dead_letter_queue = "errors";
    config::queue_policy drop;
    drop.dead_letter_queue = "";
    engine_fixture f({.queues = {{"q1", to_errors}, {"q2", drop}}});
    auto p1 = f.producer("q1");
    auto p2 = f.producer("q2");
    f.publish(p1, {"one"});
    f.publish(p2, {"two"});
    auto c1 = f.consumer("q1", 1);
    auto c2 = f.consumer("q2", 1);
    for (auto& d : f.deliveries()) f.settle(d.link, d.seq, outcome_kind::rejected);
    EXPECT_EQ(f.stats("errors").depth, 1u);
    EXPECT_FALSE(f.has_queue("DLQ"));
    EXPECT_EQ(f.stats("q2").depth, 0u);
    (void)c1, (void)c2;
}

TEST(queue_engine, max_delivery_count_dead_letters) {
    config::queue_policy pol;
    pol.max_delivery_count = 3;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.publish(p, {"poison"});
    auto c = f.consumer("q", 100);
    int deliveries = 0;
    for (int i = 0; i < 10; ++i) {
        auto d = f.deliveries();
        if (d.empty()) break;
        ++deliveries;
        f.settle(c, d[0].seq, outcome_kind::modified_failed);
    }
    EXPECT_EQ(deliveries, 3);
    EXPECT_EQ(f.stats("q").depth, 0u);
    EXPECT_EQ(f.stats("DLQ").depth, 1u);
}

// A producer may send any delivery-count. At the largest a uint holds, one
// more failed delivery keeps it there: wrapped to 0, the message escaped
// max-delivery-count and went out claiming it was never delivered.
TEST(queue_engine, delivery_count_stops_at_its_largest_value) {
    config::queue_policy pol;
    pol.max_delivery_count = 10;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    cmd_publish pub{p, {}};
    pub.messages.push_back(engine_fixture::msg("worn"));
    pub.messages.back().delivery_count = UINT32_MAX;
    f.engine->post(std::move(pub));
    auto c = f.consumer("q", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    f.settle(c, d[0].seq, outcome_kind::modified_failed);
    EXPECT_TRUE(f.deliveries().empty()) << "redelivered with its count wrapped";
    EXPECT_EQ(f.stats("DLQ").depth, 1u);
    f.consumer("DLQ", 10);
    auto dead = f.deliveries();
    ASSERT_EQ(dead.size(), 1u);
    EXPECT_EQ(dead[0].delivery_count, UINT32_MAX);
}

TEST(queue_engine, detach_returns_unsettled_with_count) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b", "c"});
    auto c = f.consumer("q", 3);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 3u);
    f.settle(c, d[0].seq, outcome_kind::accepted);
    // The client saw b; c never reached it.
    f.engine->post(cmd_detach{c, {d[1].seq}});
    f.consumer("q", 10);
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"b", "c"}));
    EXPECT_EQ(again[0].delivery_count, 1u);
    EXPECT_TRUE(again[0].redelivered);
    EXPECT_EQ(again[1].delivery_count, 0u);
}

// A queue that moves away (or loses its owner) ends its links. A consumer
// that holds messages leaves dispatch but keeps them until its connection
// detaches, saying which the client got: those come back counted as seen,
// the rest as never sent.
TEST(queue_engine, queue_detach_returns_unsettled_with_count) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b", "c"});
    auto c = f.consumer("q", 3);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 3u);
    f.settle(c, d[0].seq, outcome_kind::accepted);
    f.engine->post(cmd_detach_queues{{"q"}, {errc::redirect, "moved"}, std::nullopt});
    auto ended = f.out->take<ev_detach>(); // the producer's and the consumer's
    std::erase_if(ended, [&](const ev_detach& e) { return e.link != c; });
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_TRUE(ended[0].report) << "the engine waits for the connection's detach";
    EXPECT_EQ(f.stats("q").depth, 2u);
    EXPECT_EQ(f.stats("q").client_links, 0u) << "it no longer counts as the queue's link";
    f.engine->post(cmd_credit{c, 10, false});
    auto other = f.consumer("q", 10);
    EXPECT_TRUE(f.deliveries().empty()) << "b and c stay with the leaving consumer";
    f.engine->post(cmd_detach{c, {d[1].seq}}); // the client got b, never c
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"b", "c"}));
    EXPECT_EQ(again[0].delivery_count, 1u);
    EXPECT_TRUE(again[0].redelivered) << "first-acquirer is false now";
    EXPECT_EQ(again[1].delivery_count, 0u);
    EXPECT_FALSE(again[1].redelivered);
    f.settle(other, again[0].seq, outcome_kind::accepted);
}

// A consumer that holds nothing ends at once, waiting for no answer.
TEST(queue_engine, queue_detach_of_an_idle_consumer_needs_no_answer) {
    engine_fixture f;
    f.consumer("q", 3);
    f.engine->post(cmd_detach_queues{{"q"}, {errc::redirect, "moved"}, std::nullopt});
    auto ended = f.out->take<ev_detach>();
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_FALSE(ended[0].report);
    EXPECT_EQ(ended[0].err.code, errc::redirect);
}

// n messages "m0".."m<n-1>" on queue q, all taken by one consumer with `credit`.
std::pair<link_id, std::vector<ev_deliver>> numbered_deliveries(engine_fixture& f, int n, uint64_t credit) {
    auto p = f.producer("q");
    std::vector<std::string> sent;
    for (int i = 0; i < n; ++i) sent.push_back("m" + std::to_string(i));
    f.publish(p, sent);
    auto c = f.consumer("q", credit);
    return {c, f.deliveries()};
}

// Clients may settle in any order, twice, or keep one message while settling
// everything after it; what each consumer holds stays exact.
TEST(queue_engine, settlements_in_any_order) {
    engine_fixture f;
    const auto [c, d] = numbered_deliveries(f, 200, 300);
    ASSERT_EQ(d.size(), 200u);
    // Odd ones accepted from the back; the last one twice.
    for (int i = 199; i > 0; i -= 2) f.settle(c, d[i].seq, outcome_kind::accepted);
    f.settle(c, d[199].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 100u);
    EXPECT_EQ(f.stats("q").counters.acknowledged, 100u);
    // Released ones come back to the same consumer, older than what it holds.
    f.settle(c, d[50].seq, outcome_kind::released);
    f.settle(c, d[0].seq, outcome_kind::released);
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"m50", "m0"}));
    EXPECT_TRUE(again[1].redelivered);
    EXPECT_EQ(again[1].seq, d[0].seq);
    // Every even one but m2 accepted, in order, m0 and m50 by their new deliveries.
    for (int i = 0; i < 200; i += 2)
        if (i != 2) f.settle(c, d[i].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 1u);
    f.engine->post(cmd_detach{c, {d[2].seq}});
    f.consumer("q", 10);
    auto last = f.deliveries();
    ASSERT_EQ(f.bodies(last), (strings{"m2"}));
    EXPECT_EQ(last[0].delivery_count, 1u);
}

TEST(queue_engine, one_message_kept_while_later_ones_settle) {
    engine_fixture f;
    const auto [c, d] = numbered_deliveries(f, 1000, 1001);
    ASSERT_EQ(d.size(), 1000u);
    // The client keeps m0 and m500 and settles the rest as they come.
    for (int i = 1; i < 1000; ++i)
        if (i != 500) f.settle(c, d[i].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.settle(c, d[500].seq, outcome_kind::rejected); // to the dead-letter queue
    EXPECT_EQ(f.stats("q").depth, 1u);
    f.settle(c, d[0].seq, outcome_kind::released);
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"m0"}));
    f.settle(c, d[0].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 0u);
    EXPECT_EQ(f.stats("q").counters.acknowledged, 999u);
}

TEST(queue_engine, expired_message_is_never_delivered) {
    engine_fixture f;
    auto p = f.producer("q");
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg("short", {}, f.now_ms + 100));
    c.messages.push_back(engine_fixture::msg("long", {}, f.now_ms + 100000));
    f.engine->post(std::move(c));
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.now_ms += 200;
    f.engine->post(cmd_tick{});
    EXPECT_EQ(f.stats("q").depth, 1u);
    EXPECT_EQ(f.stats("q").counters.expired, 1u);
    f.consumer("q", 10);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"long"}));
}

TEST(queue_engine, expired_message_skipped_at_delivery_without_tick) {
    engine_fixture f;
    auto p = f.producer("q");
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg("short", {}, f.now_ms + 100));
    c.messages.push_back(engine_fixture::msg("plain"));
    f.engine->post(std::move(c));
    f.now_ms += 200;
    f.consumer("q", 10);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"plain"}));
}

TEST(queue_engine, browser_sees_without_consuming) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b"});
    f.consumer("q", 10, /*browse=*/true);
    auto d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"a", "b"}));
    EXPECT_TRUE(d[0].settle_on_send);
    EXPECT_TRUE(d[0].copy) << "nothing to settle";
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.publish(p, {"c"});
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"c"})) << "a browser sees new messages once";
    f.consumer("q", 10);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"a", "b", "c"}));
}

TEST(queue_engine, dynamic_queue_lives_as_long_as_its_link) {
    engine_fixture f;
    link_id c = 77;
    f.engine->post(cmd_attach_consumer{c, "", true, false, false, f.out});
    auto att = f.out->take<ev_attached>();
    ASSERT_EQ(att.size(), 1u);
    ASSERT_FALSE(att[0].err);
    const std::string addr = att[0].address;
    EXPECT_EQ(addr.rfind("$dynamic.test.", 0), 0u) << addr;
    f.engine->post(cmd_credit{c, 10, false});

    auto anon = f.producer("");
    cmd_publish pub{anon, {}};
    pub.messages.push_back(engine_fixture::msg("reply", addr));
    f.engine->post(std::move(pub));
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"reply"}));

    f.engine->post(cmd_detach{c, {}});
    EXPECT_FALSE(f.has_queue(addr));
    cmd_publish late{anon, {}};
    late.messages.push_back(engine_fixture::msg("late", addr));
    f.engine->post(std::move(late));
    auto r = f.out->take<ev_published>();
    ASSERT_FALSE(r.empty());
    ASSERT_EQ(r.back().failures.size(), 1u);
    EXPECT_EQ(r.back().failures[0].err.code, errc::not_found);
}

TEST(queue_engine, anonymous_relay_routes_by_to) {
    engine_fixture f({.auto_create = false, .queues = {{"a", {}}, {"b", {}}}});
    auto anon = f.producer("");
    cmd_publish pub{anon, {}};
    pub.messages.push_back(engine_fixture::msg("1", "a"));
    pub.messages.push_back(engine_fixture::msg("2", "missing"));
    pub.messages.push_back(engine_fixture::msg("3", "b"));
    pub.messages.push_back(engine_fixture::msg("4", ""));
    f.engine->post(std::move(pub));
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].count, 4u);
    ASSERT_EQ(r[0].failures.size(), 2u);
    EXPECT_EQ(r[0].failures[0].index, 1u);
    EXPECT_EQ(r[0].failures[0].err.code, errc::not_found);
    EXPECT_EQ(r[0].failures[1].index, 3u);
    EXPECT_EQ(r[0].failures[1].err.code, errc::invalid_field);
    EXPECT_EQ(f.stats("a").depth, 1u);
    EXPECT_EQ(f.stats("b").depth, 1u);
}

TEST(queue_engine, unsent_delivery_goes_back_without_ping_pong) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {"a", "b"});
    auto c = f.consumer("q", 2);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 2u);
    // The client lowered its credit to 0 before the connection could send b.
    f.engine->post(cmd_settle{c, {{d[1].seq, outcome_kind::unsent}}, 1});
    EXPECT_TRUE(f.deliveries().empty());
    f.engine->post(cmd_credit{c, 2, false});
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), (strings{"b"}));
    EXPECT_EQ(again[0].delivery_count, 0u);
    EXPECT_FALSE(again[0].redelivered);
}


namespace wharf::engine::testing {
namespace {

TEST(queue_engine, only_durable_messages_on_durable_queues_are_stored) {
    config::queue_policy transient_queue;
    transient_queue.durable = false;
    engine_fixture f({.queues = {{"t", transient_queue}}});
    auto p = f.producer("d");
    cmd_publish c{p, {}};
    auto durable = engine_fixture::msg("durable");
    durable.durable = true;
    c.messages.push_back(std::move(durable));
    c.messages.push_back(engine_fixture::msg("not durable"));
    f.engine->post(std::move(c));
    auto pt = f.producer("t");
    cmd_publish c2{pt, {}};
    auto on_transient = engine_fixture::msg("durable on a transient queue");
    on_transient.durable = true;
    c2.messages.push_back(std::move(on_transient));
    f.engine->post(std::move(c2));
    EXPECT_EQ(f.store.enqueued(), 1u);

    link_id dyn = 99;
    f.engine->post(cmd_attach_consumer{dyn, "", true, false, false, f.out});
    auto addr = f.out->take<ev_attached>().back().address;
    auto anon = f.producer("");
    cmd_publish c3{anon, {}};
    auto reply = engine_fixture::msg("reply", addr);
    reply.durable = true;
    c3.messages.push_back(std::move(reply));
    f.engine->post(std::move(c3));
    EXPECT_EQ(f.store.enqueued(), 1u) << "temporary queues are never stored";
}

} // namespace
} // namespace wharf::engine::testing

// What a node reports as its load (the WLM's heartbeat), and the version
// that tells a plugin the set of queues changed: temporary queues count in
// none of them; creating and deleting a queue each move the version.
TEST(queue_engine, totals_and_the_queue_set_version) {
    engine_fixture f;
    const uint64_t v0 = f.engine->queue_set_version();
    auto a = f.producer("a");
    f.publish(a, {"1", "2", "3"});
    auto b = f.producer("b");
    f.publish(b, {"4"});
    (void)f.engine->totals(); // it waits for the engine: what was posted before is done
    const uint64_t v1 = f.engine->queue_set_version();
    EXPECT_NE(v1, v0) << "a and b were created";
    f.engine->post(cmd_attach_consumer{77, "", true, false, false, f.out});
    const std::string temporary = f.out->take<ev_attached>().back().address;
    ASSERT_EQ(temporary.rfind("$dynamic.", 0), 0u) << temporary;
    auto anon = f.producer("");
    cmd_publish pub{anon, {}};
    pub.messages.push_back(engine_fixture::msg("to the temporary queue", temporary));
    f.engine->post(std::move(pub));

    const auto t = f.engine->totals();
    EXPECT_EQ(t.queues, 2u) << "a and b, not the temporary queue";
    EXPECT_EQ(t.messages, 4u);
    EXPECT_EQ(f.engine->queue_set_version(), v1) << "a temporary queue does not count";

    ASSERT_TRUE(f.engine->remove("b"));
    EXPECT_NE(f.engine->queue_set_version(), v1) << "b was deleted";
    EXPECT_EQ(f.engine->totals().queues, 1u);
    EXPECT_EQ(f.engine->totals().messages, 3u);
}

} // namespace
} // namespace wharf::engine::testing
