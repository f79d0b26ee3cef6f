// The queue engine's depth limits: the reject policy refuses what does not
// fit; the block policy holds it, unanswered, and the producer's credit,
// until there is room, whatever makes it.

#include "broker/engine/tests/engine_fixture.hpp"

namespace wharf::engine::testing {
namespace {

using strings = std::vector<std::string>;

TEST(queue_engine, reject_policy_refuses_when_full) {
    config::queue_policy pol;
    pol.max_depth_messages = 2;
    pol.overflow = config::overflow_policy::reject;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.publish(p, {"a", "b", "c"});
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r[0].failures.size(), 1u);
    EXPECT_EQ(r[0].failures[0].index, 2u);
    EXPECT_EQ(r[0].failures[0].err.code, errc::resource_limit_exceeded);
    EXPECT_EQ(f.stats("q").depth, 2u);
}

TEST(queue_engine, byte_limit_counts_bytes) {
    config::queue_policy pol;
    pol.max_depth_bytes = 10;
    pol.overflow = config::overflow_policy::reject;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.publish(p, {"12345", "12345", "1"});
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r[0].failures.size(), 1u);
    EXPECT_EQ(r[0].failures[0].index, 2u);
}

TEST(queue_engine, block_policy_holds_messages_until_there_is_room) {
    config::queue_policy pol;
    pol.max_depth_messages = 2;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.out->clear();
    f.publish(p, {"a", "b"});
    EXPECT_TRUE(f.out->take<ev_flow_control>().empty()) << "not full until a message would go over";
    EXPECT_EQ(f.out->take<ev_published>().at(0).count, 2u);

    f.publish(p, {"c", "d"});
    auto fc = f.out->take<ev_flow_control>();
    ASSERT_EQ(fc.size(), 1u);
    EXPECT_TRUE(fc[0].blocked);
    EXPECT_TRUE(f.out->take<ev_published>().empty()) << "c and d wait, unsettled, for room";
    EXPECT_EQ(f.stats("q").depth, 2u) << "the queue never holds more than its limit";

    auto c = f.consumer("q", 1);
    auto d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"a"}));
    f.settle(c, d[0].seq, outcome_kind::accepted);
    auto pub = f.out->take<ev_published>();
    ASSERT_EQ(pub.size(), 1u);
    EXPECT_EQ(pub[0].count, 1u) << "room for one: c is queued and accepted, d still waits";
    EXPECT_TRUE(pub[0].failures.empty());
    EXPECT_TRUE(f.out->take<ev_flow_control>().empty()) << "still blocked";
    EXPECT_EQ(f.stats("q").depth, 2u);

    f.engine->post(cmd_credit{c, 10, false});
    for (auto& x : f.deliveries()) f.settle(c, x.seq, outcome_kind::accepted);
    fc = f.out->take<ev_flow_control>();
    ASSERT_FALSE(fc.empty());
    EXPECT_FALSE(fc.back().blocked);
    f.engine->post(cmd_credit{c, 20, false});
    auto rest = f.deliveries();
    EXPECT_EQ(f.bodies(rest), (strings{"d"})) << "order kept across the wait";
}

// A pre-settled consumer's messages leave the queue as its connection sends
// them: the room that makes lets the waiting producer go on.
TEST(queue_engine, block_policy_resumes_when_a_presettled_consumer_makes_room) {
    config::queue_policy pol;
    pol.max_depth_messages = 2;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.out->clear();
    f.publish(p, {"a", "b", "c"});
    auto fc = f.out->take<ev_flow_control>();
    ASSERT_EQ(fc.size(), 1u);
    ASSERT_TRUE(fc[0].blocked);

    auto c = f.consumer("q", 10, false, /*presettled=*/true);
    auto d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"a", "b"}));
    // The connection sent them: room for c, which dispatch takes at once.
    for (auto& e : d) f.settle(c, e.seq, outcome_kind::accepted);
    d = f.deliveries();
    ASSERT_EQ(f.bodies(d), (strings{"c"})) << "c joins the queue as room is made";
    f.settle(c, d[0].seq, outcome_kind::accepted);
    fc = f.out->take<ev_flow_control>();
    ASSERT_FALSE(fc.empty());
    EXPECT_FALSE(fc.back().blocked) << "the producer may send again";
    auto pub = f.out->take<ev_published>();
    uint32_t answered = 0;
    for (auto& e : pub) answered += e.count;
    EXPECT_EQ(answered, 3u);
    EXPECT_EQ(f.stats("q").depth, 0u);
}

// Messages that expire while a consumer's credit dispatches them make room
// as well; the tick after finds nothing left to expire.
TEST(queue_engine, block_policy_resumes_when_dispatch_drops_expired_messages) {
    config::queue_policy pol;
    pol.max_depth_messages = 2;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.out->clear();
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg("a", {}, f.now_ms + 100));
    c.messages.push_back(engine_fixture::msg("b", {}, f.now_ms + 100));
    c.messages.push_back(engine_fixture::msg("c"));
    f.engine->post(std::move(c));
    ASSERT_EQ(f.out->take<ev_flow_control>().size(), 1u);

    f.now_ms += 1000;
    f.consumer("q", 10);
    f.engine->post(cmd_tick{});
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"c"}));
    auto fc = f.out->take<ev_flow_control>();
    ASSERT_FALSE(fc.empty());
    EXPECT_FALSE(fc.back().blocked);
}

TEST(queue_engine, block_policy_rejects_a_message_that_can_never_fit) {
    config::queue_policy pol;
    pol.max_depth_bytes = 4;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    f.publish(p, {"123456"});
    auto r = f.out->take<ev_published>();
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].failures.size(), 1u);
    EXPECT_EQ(r[0].failures[0].err.code, errc::resource_limit_exceeded);
}

const std::string a("\x00\x53\x77\xa1\x01" "a", 6), b("\x00\x53\x77\xa1\x01" "b", 6);
const std::string annotations("\xc1\x05\x02\xa3\x01k\x40", 7); // {k: null}

// A message that a modified outcome annotated counts at its new size; the
// annotations go only to the message they were for, and an empty map
// changes nothing.
TEST(queue_engine, an_annotated_message_counts_at_its_new_size) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {a, b});
    auto c = f.consumer("q", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 2u);
    const std::string& map = annotations;
    f.engine->post(cmd_settle{c, {{d[0].seq, outcome_kind::modified_failed}, {d[1].seq, outcome_kind::released}},
                              std::nullopt, {{d[0].seq, map}, {d[1].seq, std::string("\xc1\x01\x00", 3)}}});
    d = f.deliveries();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(std::string(d[0].body.bytes()), std::string("\x00\x53\x72", 3) + map + a);
    EXPECT_EQ(std::string(d[1].body.bytes()), b) << "an empty map rewrote the message";
    EXPECT_EQ(f.stats("q").depth_bytes, a.size() + 3 + map.size() + b.size());
    f.settle(c, d[0].seq, outcome_kind::accepted);
    f.settle(c, d[1].seq, outcome_kind::accepted);
    EXPECT_EQ(f.stats("q").depth_bytes, 0u);
}

// Annotations never grow a message past the node's max-message-size: the
// outcome is applied without them.
TEST(queue_engine, annotations_that_would_outgrow_the_largest_message_are_not_applied) {
    engine_fixture f({.max_message_size = a.size() + 5});
    auto p = f.producer("q");
    f.publish(p, {a});
    auto c = f.consumer("q", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    f.engine->post(cmd_settle{c, {{d[0].seq, outcome_kind::modified_failed}}, std::nullopt, {{d[0].seq, annotations}}});
    d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(std::string(d[0].body.bytes()), a);
    EXPECT_EQ(d[0].delivery_count, 1u) << "the outcome itself was not applied";
}

} // namespace
} // namespace wharf::engine::testing
