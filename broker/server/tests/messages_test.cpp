// Message content: every section round-trips, a 10 MB message round-trips,
// and expired messages are never delivered.

#include "broker/server/tests/component_test.hpp"

#include <proton/binary.hpp>
#include <proton/map.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/timestamp.hpp>
#include <proton/types.hpp>
#include <proton/uuid.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

namespace wharf::server::test {
namespace {

class messages : public component_test {};

int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// A message with every section and every properties field set.
proton::message full_message() {
    proton::message m;
    m.durable(true);
    m.priority(7);
    m.ttl(proton::duration(600000));
    m.first_acquirer(true);
    m.delivery_count(2);
    m.delivery_annotations().put(proton::symbol("x-opt-da"), "delivery-annotation");
    m.message_annotations().put(proton::symbol("x-opt-ma"), int64_t(42));
    m.message_annotations().put(proton::symbol("x-opt-ma-str"), "value");
    m.id(proton::message_id(uint64_t(123456789)));
    m.user("user-id-bytes");
    m.to("every-section");
    m.subject("subject");
    m.reply_to("reply-here");
    m.correlation_id(proton::message_id(proton::uuid::random()));
    m.content_type("application/x-test");
    m.content_encoding("identity");
    m.expiry_time(proton::timestamp(now_ms() + 3600000));
    m.creation_time(proton::timestamp(now_ms()));
    m.group_id("group");
    m.group_sequence(99);
    m.reply_to_group_id("reply-group");
    m.properties().put("string", "text");
    m.properties().put("int", int32_t(-5));
    m.properties().put("double", 2.5);
    m.properties().put("bool", true);
    return m;
}

struct body_case {
    std::string name;
    std::function<void(proton::message&)> set;
};
void PrintTo(const body_case& c, std::ostream* o) { *o << c.name; }

class every_section : public component_test, public ::testing::WithParamInterface<body_case> {};

TEST_P(every_section, round_trips_with_equal_content) {
    start_broker();
    auto c = connect();
    proton::message sent = full_message();
    GetParam().set(sent);
    test_sender s = c->open_sender("every-section");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    s.send(sent);
    ASSERT_EQ(s.wait_outcome(0).kind, outcome_kind::accepted);
    test_receiver r = c->open_receiver("every-section", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    const proton::message& m = got[0].msg;
    EXPECT_EQ(m.durable(), sent.durable());
    EXPECT_EQ(m.priority(), sent.priority());
    EXPECT_EQ(m.ttl(), sent.ttl());
    EXPECT_EQ(m.first_acquirer(), sent.first_acquirer());
    EXPECT_EQ(m.delivery_count(), sent.delivery_count());
    EXPECT_EQ(m.id(), sent.id());
    EXPECT_EQ(m.user(), sent.user());
    EXPECT_EQ(m.to(), sent.to());
    EXPECT_EQ(m.subject(), sent.subject());
    EXPECT_EQ(m.reply_to(), sent.reply_to());
    EXPECT_EQ(m.correlation_id(), sent.correlation_id());
    EXPECT_EQ(m.content_type(), sent.content_type());
    EXPECT_EQ(m.content_encoding(), sent.content_encoding());
    EXPECT_EQ(m.expiry_time(), sent.expiry_time());
    EXPECT_EQ(m.creation_time(), sent.creation_time());
    EXPECT_EQ(m.group_id(), sent.group_id());
    EXPECT_EQ(m.group_sequence(), sent.group_sequence());
    EXPECT_EQ(m.reply_to_group_id(), sent.reply_to_group_id());
    EXPECT_EQ(proton::to_string(m.properties().value()), proton::to_string(sent.properties().value()));
    EXPECT_EQ(proton::to_string(m.message_annotations().value()),
              proton::to_string(sent.message_annotations().value()));
    EXPECT_EQ(proton::to_string(m.delivery_annotations().value()),
              proton::to_string(sent.delivery_annotations().value()));
    EXPECT_EQ(m.inferred(), sent.inferred());
    EXPECT_EQ(m.body().type(), sent.body().type());
    EXPECT_EQ(m.body(), sent.body());
    // Re-encoding what arrived gives what was sent (Proton encodes deterministically).
    EXPECT_EQ(m.encode(), sent.encode());
    r.settle_all(settle_as::accept);
}

INSTANTIATE_TEST_SUITE_P(
    body_types, every_section,
    ::testing::Values(
        body_case{"value_string", [](proton::message& m) { m.body("a string body"); }},
        body_case{"value_long", [](proton::message& m) { m.body(int64_t(-1234567890123)); }},
        body_case{"value_double", [](proton::message& m) { m.body(3.25); }},
        body_case{"value_symbol", [](proton::message& m) { m.body(proton::symbol("sym")); }},
        body_case{"value_uuid", [](proton::message& m) { m.body(proton::uuid::random()); }},
        body_case{"value_binary", [](proton::message& m) { m.body(proton::binary("\x01\x02\x00\x03")); }},
        body_case{"value_null", [](proton::message& m) { m.body(proton::value()); }},
        body_case{"value_map",
                  [](proton::message& m) {
                      m.body(std::map<std::string, proton::value>{{"k", 1}, {"s", "v"}});
                  }},
        body_case{"value_list",
                  [](proton::message& m) {
                      m.body(std::vector<proton::value>{proton::value(1), proton::value("two")});
                  }},
        body_case{"data_section",
                  [](proton::message& m) {
                      m.body(proton::binary(std::string("raw\0bytes", 9)));
                      m.inferred(true);
                  }},
        body_case{"sequence_section",
                  [](proton::message& m) {
                      m.body(std::vector<proton::value>{proton::value(int32_t(1)),
                                                         proton::value(int32_t(2))});
                      m.inferred(true);
                  }}),
    [](const ::testing::TestParamInfo<body_case>& info) { return info.param.name; });

TEST_F(messages, ten_megabyte_message_round_trips_exactly) {
    start_broker();
    auto c = connect();
    std::string payload(10 * 1024 * 1024, '\0');
    std::mt19937_64 rng(20240601);
    for (size_t i = 0; i + 8 <= payload.size(); i += 8) {
        const uint64_t v = rng();
        std::memcpy(&payload[i], &v, 8);
    }
    proton::message sent;
    sent.body(proton::binary(payload));
    sent.inferred(true);
    test_sender s = c->open_sender("large");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    s.send(sent);
    auto out = s.wait_outcome(0);
    ASSERT_EQ(out.kind, outcome_kind::accepted) << out.condition;
    test_receiver r = c->open_receiver("large", receiver_credit(1));
    auto got = r.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    const auto body = proton::get<proton::binary>(got[0].msg.body());
    ASSERT_EQ(body.size(), payload.size());
    EXPECT_EQ(std::memcmp(body.data(), payload.data(), payload.size()), 0) << "body bytes differ";
    r.settle_all(settle_as::accept);
}

TEST_F(messages, expired_ttl_message_is_not_delivered) {
    start_broker();
    auto c = connect();
    test_sender s = c->open_sender("ttl");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    const auto sent_at = std::chrono::steady_clock::now();
    proton::message short_lived = text_message("expires");
    short_lived.ttl(proton::duration(100));
    s.send(short_lived);
    s.send(text_message("marker"));
    auto outs = s.wait_outcomes(2);
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].kind, outcome_kind::accepted);
    EXPECT_EQ(outs[1].kind, outcome_kind::accepted);
    // Attach the consumer only once the ttl has certainly passed.
    std::this_thread::sleep_until(sent_at + std::chrono::milliseconds(250));
    test_receiver r = c->open_receiver("ttl", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(body_of(got[0]), "marker") << "an expired message was delivered";
}

TEST_F(messages, past_absolute_expiry_time_is_not_delivered) {
    start_broker();
    auto c = connect();
    test_sender s = c->open_sender("abs-expiry");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    proton::message expired = text_message("already-expired");
    expired.expiry_time(proton::timestamp(now_ms() - 60000));
    s.send(expired);
    s.send(text_message("marker"));
    s.wait_outcomes(2);
    test_receiver r = c->open_receiver("abs-expiry", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(body_of(got[0]), "marker") << "an expired message was delivered";
}

TEST_F(messages, ttl_not_expired_is_delivered) {
    start_broker();
    auto c = connect();
    proton::message m = text_message("long-lived");
    m.ttl(proton::duration(600000));
    test_sender s = c->open_sender("ttl-long");
    ASSERT_TRUE(s.wait_open());
    s.send(m);
    test_receiver r = c->open_receiver("ttl-long", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(body_of(got[0]), "long-lived");
}

TEST_F(messages, expired_message_is_dead_lettered_when_the_queue_says_so) {
    start_broker({.config_toml = "[[queue]]\nname = \"ttl-dl\"\nexpiry-policy = \"dead-letter\"\n"
                                 "dead-letter-queue = \"ttl-dl.dlq\"\n"});
    auto c = connect();
    test_sender s = c->open_sender("ttl-dl");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    const auto sent_at = std::chrono::steady_clock::now();
    proton::message short_lived = text_message("expires");
    short_lived.ttl(proton::duration(100));
    s.send(short_lived);
    s.send(text_message("marker"));
    s.wait_outcomes(2);
    std::this_thread::sleep_until(sent_at + std::chrono::milliseconds(250));
    test_receiver r = c->open_receiver("ttl-dl", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(body_of(got[0]), "marker") << "an expired message was delivered";
    // It left the queue before the marker was delivered: it is on the DLQ now.
    auto d = connect({.timeout = std::chrono::milliseconds(3000)});
    test_receiver dlq = d->open_receiver("ttl-dl.dlq", receiver_credit(10));
    auto dead = dlq.wait_messages(1);
    ASSERT_EQ(dead.size(), 1u) << "the expired message did not reach ttl-dl.dlq";
    EXPECT_EQ(body_of(dead[0]), "expires");
}

TEST_F(messages, message_expired_on_arrival_is_dead_lettered_when_the_queue_says_so) {
    start_broker({.config_toml = "[[queue]]\nname = \"abs-dl\"\nexpiry-policy = \"dead-letter\"\n"
                                 "dead-letter-queue = \"abs-dl.dlq\"\n"});
    auto c = connect({.timeout = std::chrono::milliseconds(3000)});
    test_sender s = c->open_sender("abs-dl");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    proton::message expired = text_message("already-expired");
    expired.expiry_time(proton::timestamp(now_ms() - 60000));
    s.send(expired);
    EXPECT_EQ(s.wait_outcome(0).kind, outcome_kind::accepted);
    test_receiver dlq = c->open_receiver("abs-dl.dlq", receiver_credit(10));
    auto dead = dlq.wait_messages(1);
    ASSERT_EQ(dead.size(), 1u) << "the expired message did not reach abs-dl.dlq";
    EXPECT_EQ(body_of(dead[0]), "already-expired");
}

} // namespace
} // namespace wharf::server::test
