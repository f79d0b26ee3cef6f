// The queue engine's expiry: an expired message is dead-lettered (with the
// expiry policy so set) and its copy never expires again, not even where a
// dead-letter queue on another node reads it anew.

#include "broker/amqp/message_codec.hpp"
#include "broker/engine/tests/engine_fixture.hpp"

namespace wharf::engine::testing {
namespace {

using strings = std::vector<std::string>;

TEST(queue_engine, expiry_policy_dead_letter) {
    config::queue_policy pol;
    pol.expiry = config::expiry_policy::dead_letter;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg("ttl", {}, f.now_ms + 10));
    f.engine->post(std::move(c));
    f.now_ms += 20;
    f.engine->post(cmd_tick{});
    EXPECT_EQ(f.stats("DLQ").depth, 1u);
}

TEST(queue_engine, dead_lettered_expired_message_does_not_expire_again) {
    config::queue_policy pol;
    pol.expiry = config::expiry_policy::dead_letter;
    engine_fixture f({.defaults = pol});
    auto p = f.producer("q");
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg("ttl", {}, f.now_ms + 10));
    c.messages.push_back(engine_fixture::msg("gone-on-arrival", {}, f.now_ms - 10));
    f.engine->post(std::move(c));
    f.now_ms += 20;
    f.consumer("q", 10);
    EXPECT_TRUE(f.deliveries().empty());
    f.consumer("DLQ", 10);
    EXPECT_EQ(f.bodies(f.deliveries()), (strings{"gone-on-arrival", "ttl"}));
}

// The copy keeps no TTL in its header either: a dead-letter queue on another
// node read it again, and the copy expired there, lost.
TEST(queue_engine, a_dead_letter_copy_carries_no_ttl) {
    config::queue_policy pol;
    pol.expiry = config::expiry_policy::dead_letter;
    engine_fixture f({.defaults = pol});
    amqp::header_fields h;
    h.durable = true;
    h.ttl_ms = 10;
    std::string bytes;
    amqp::encode_header(h, bytes);
    bytes += std::string("\x00\x53\x75\xa0\x02hi", 7); // a data section
    auto p = f.producer("q");
    cmd_publish c{p, {}};
    c.messages.push_back(engine_fixture::msg(bytes, {}, f.now_ms + 10));
    f.engine->post(std::move(c));
    f.now_ms += 20;
    f.engine->post(cmd_tick{});
    f.consumer("DLQ", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    auto info = amqp::scan_message(d[0].body.bytes());
    ASSERT_TRUE(info);
    EXPECT_FALSE(info->header.ttl_ms);
    EXPECT_TRUE(info->header.durable); // the rest as it was
    EXPECT_EQ(d[0].body.bytes().substr(info->header_end), bytes.substr(bytes.size() - 7));
}

} // namespace
} // namespace wharf::engine::testing
