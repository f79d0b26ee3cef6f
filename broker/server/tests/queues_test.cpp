// Queues are created on first attach (either direction), refused with
// amqp:not-found when auto-create is off, and declared queues exist up front.
// Also: both connection kinds (no SASL, SASL ANONYMOUS) work.

#include "broker/server/tests/component_test.hpp"

namespace wharf::server::test {
namespace {

class queues : public component_test {};

TEST_F(queues, receiver_attaching_first_creates_the_queue) {
    start_broker();
    auto c = connect();
    test_receiver r = c->open_receiver("created-by-receiver", receiver_credit(10));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    EXPECT_EQ(r.remote_source_address(), "created-by-receiver");
    auto p = connect();
    send_texts(*p, "created-by-receiver", 2);
    EXPECT_EQ(bodies(r.wait_messages(2)), expected_texts(0, 2));
}

TEST_F(queues, sender_attaching_first_creates_the_queue) {
    start_broker();
    auto p = connect();
    send_texts(*p, "created-by-sender", 3);
    auto c = connect();
    test_receiver r = c->open_receiver("created-by-sender", receiver_credit(10));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    EXPECT_EQ(bodies(r.wait_messages(3)), expected_texts(0, 3));
}

TEST_F(queues, unknown_address_is_not_found_when_auto_create_is_off) {
    start_broker({.args = {"--auto-create-queues", "false"}});
    auto c = connect();
    test_sender s = c->open_sender("no-such-queue");
    auto serr = s.wait_error();
    ASSERT_TRUE(serr.has_value()) << "sender attach to an unknown address was not refused";
    EXPECT_EQ(serr->name, "amqp:not-found") << *serr;
    test_receiver r = c->open_receiver("no-such-queue-either", receiver_credit(10));
    auto rerr = r.wait_error();
    ASSERT_TRUE(rerr.has_value()) << "receiver attach to an unknown address was not refused";
    EXPECT_EQ(rerr->name, "amqp:not-found") << *rerr;
    // A refused link does not take the connection down.
    EXPECT_FALSE(c->error().has_value()) << c->error();
    EXPECT_FALSE(c->is_closed());
}

TEST_F(queues, declared_queues_exist_with_auto_create_off) {
    start_broker({.config_toml = "auto-create-queues = false\n"
                                 "[[queue]]\nname = \"declared-a\"\n"
                                 "[[queue]]\nname = \"declared-b\"\n"});
    auto c = connect();
    test_receiver r = c->open_receiver("declared-b", receiver_credit(10));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    send_texts(*c, "declared-a", 1, "a");
    send_texts(*c, "declared-b", 2, "b");
    EXPECT_EQ(bodies(r.wait_messages(2)), expected_texts(0, 2, "b"));
    test_receiver ra = c->open_receiver("declared-a", receiver_credit(10));
    EXPECT_EQ(bodies(ra.wait_messages(1)), expected_texts(0, 1, "a"));
}

TEST_F(queues, client_without_sasl_layer_works) {
    start_broker();
    auto c = connect({.sasl = sasl_mode::none});
    EXPECT_EQ(c->remote_container_id(), "ct");
    send_texts(*c, "plain", 1);
    test_receiver r = c->open_receiver("plain", receiver_credit(10));
    EXPECT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
}

TEST_F(queues, client_with_sasl_anonymous_works) {
    start_broker();
    auto c = connect({.sasl = sasl_mode::anonymous});
    EXPECT_EQ(c->remote_container_id(), "ct");
    send_texts(*c, "sasl", 1);
    test_receiver r = c->open_receiver("sasl", receiver_credit(10));
    EXPECT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
}

} // namespace
} // namespace wharf::server::test
