// Consumers that never settle themselves: at-most-once (pre-settled)
// consumers, whose messages the engine holds until their connection says it
// sent them, and messages too large for the consumer they were meant for.

#include "broker/engine/tests/engine_fixture.hpp"

namespace wharf::engine::testing {
namespace {

using strings = std::vector<std::string>;

// Publishes `bodies` to q and attaches an at-most-once consumer with
// `credit`: the consumer and what the engine gave it.
std::pair<link_id, std::vector<ev_deliver>> presettled_deliveries(engine_fixture& f, std::vector<std::string> bodies,
                                                                  uint64_t credit) {
    f.publish(f.producer("q"), std::move(bodies));
    auto c = f.consumer("q", credit, false, /*presettled=*/true);
    return {c, f.deliveries()};
}

// A new consumer of q gets `want`, as if never delivered before.
void expect_back_unchanged(engine_fixture& f, const strings& want) {
    f.consumer("q", 10);
    auto again = f.deliveries();
    ASSERT_EQ(f.bodies(again), want);
    for (const auto& e : again) {
        EXPECT_FALSE(e.redelivered);
        EXPECT_EQ(e.delivery_count, 0u);
    }
}

// An at-most-once consumer's messages stay in the queue (acquired) until
// its connection says it sent them.
TEST(queue_engine, presettled_message_leaves_the_queue_once_sent) {
    engine_fixture f;
    auto [c, d] = presettled_deliveries(f, {"a", "b"}, 10);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_TRUE(d[0].settle_on_send);
    EXPECT_FALSE(d[0].copy);
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.settle(c, d[0].seq, outcome_kind::accepted);
    f.settle(c, d[1].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth, 0u);
    EXPECT_EQ(f.stats("q").counters.acknowledged, 2u);
}

// What the connection could not send (the client took its credit back)
// returns as never dispatched, and a detach returns what never reached
// the connection: neither is lost, nor counted as seen.
TEST(queue_engine, presettled_message_never_sent_is_not_lost) {
    engine_fixture f;
    auto [c, d] = presettled_deliveries(f, {"a", "b", "c"}, 3);
    ASSERT_EQ(d.size(), 3u);
    f.settle(c, d[0].seq, outcome_kind::accepted);
    f.engine->post(cmd_settle{c, {{d[1].seq, outcome_kind::unsent}}, /*limit=*/1});
    EXPECT_TRUE(f.deliveries().empty()) << "no credit left";
    EXPECT_EQ(f.stats("q").depth, 2u);
    f.engine->post(cmd_detach{c, {}});
    expect_back_unchanged(f, {"b", "c"});
}

// A relay's batch link for an at-most-once consumer: when the relay
// detaches, it has answered every message it passed to its client, so what
// is left never reached the client and goes back unchanged. When the link
// ends without that (the connection to the relay dropped), its answers may
// be lost: what is left counts as sent, as at-most-once never sends twice.
TEST(queue_engine, relayed_presettled_messages_left_at_a_detach) {
    for (const bool answered : {true, false}) {
        engine_fixture f;
        auto [c, d] = presettled_deliveries(f, {"a", "b"}, 2);
        ASSERT_EQ(d.size(), 2u);
        cmd_detach end{c, {}};
        end.all_sent = true;
        end.presettled_sent = !answered;
        f.engine->post(std::move(end));
        EXPECT_EQ(f.stats("q").depth, answered ? 2u : 0u) << "answered " << answered;
        if (answered) expect_back_unchanged(f, {"a", "b"});
    }
}

// A message larger than a consumer takes comes back from its connection
// unsent: the consumer keeps its credit and gets the next message, and the
// large one waits for another consumer.
TEST(queue_engine, too_large_for_a_consumer_waits_for_another) {
    engine_fixture f;
    f.publish(f.producer("q"), {"big", "b"});
    auto small = f.consumer("q", 1);
    auto d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"big"}));
    f.settle(small, d[0].seq, outcome_kind::too_large);
    d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"b"})) << "its credit came back";
    f.settle(small, d[0].seq, outcome_kind::accepted);
    expect_back_unchanged(f, {"big"});
}

// A browser's copy too large for it is passed by, and its credit comes
// back: with credit 1 it stalled for good on the first such message.
TEST(queue_engine, too_large_for_a_browser_is_passed_by) {
    engine_fixture f;
    f.publish(f.producer("q"), {"big", "b"});
    auto browser = f.consumer("q", 1, /*browse=*/true);
    auto d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"big"}));
    f.settle(browser, d[0].seq, outcome_kind::too_large);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"b"})) << "its credit came back";
    EXPECT_EQ(f.stats("q").depth, 2u);
}

// A queue that moves away: an at-most-once consumer's messages stay until
// its connection has answered for each (sent, or unsent for want of
// credit) and detached; what it did not send goes back unchanged, and
// nothing comes back that it sent.
TEST(queue_engine, queue_detach_waits_for_presettled_answers) {
    engine_fixture f;
    auto [c, d] = presettled_deliveries(f, {"a", "b", "c"}, 2);
    ASSERT_EQ(d.size(), 2u);
    f.engine->post(cmd_detach_queues{{"q"}, {errc::redirect, "moved"}, std::nullopt});
    auto ended = f.out->take<ev_detach>(); // the producer's and the consumer's
    std::erase_if(ended, [&](const ev_detach& e) { return e.link != c; });
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_TRUE(ended[0].report);
    EXPECT_EQ(f.stats("q").depth, 3u) << "a and b wait for the connection's answers";
    f.settle(c, d[0].seq, outcome_kind::accepted);
    f.engine->post(cmd_settle{c, {{d[1].seq, outcome_kind::unsent}}, /*limit=*/1});
    EXPECT_TRUE(f.deliveries().empty()) << "the leaving consumer gets nothing more";
    f.engine->post(cmd_detach{c, {}});
    EXPECT_EQ(f.stats("q").depth, 2u);
    expect_back_unchanged(f, {"b", "c"});
}

} // namespace
} // namespace wharf::engine::testing
