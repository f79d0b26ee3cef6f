// Outcomes a consumer settles with, and what becomes of the message.

#include "broker/server/tests/component_test.hpp"

#include <proton/annotation_key.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/map.hpp>
#include <proton/message.hpp>

namespace wharf::server::test {
namespace {

class outcomes : public component_test {
  protected:
    // The first message a fresh consumer on `address` gets, after a marker
    // was sent: proves everything before the marker is gone.
    void expect_only_marker_left(test_client& c, const std::string& address) {
        send_texts(c, address, 1, "marker");
        test_receiver r = c.open_receiver(address, receiver_credit(10));
        auto got = r.wait_messages(1);
        ASSERT_FALSE(got.empty());
        EXPECT_EQ(body_of(got[0]), "marker0") << "a settled message was delivered again";
        r.settle_all(settle_as::accept);
    }
};

TEST_F(outcomes, accepted_removes_the_message) {
    start_broker();
    auto c = connect();
    send_texts(*c, "acc", 1);
    test_receiver r = c->open_receiver("acc", receiver_credit(10));
    ASSERT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
    r.settle(0, settle_as::accept);
    r.close();
    ASSERT_TRUE(r.wait_closed());
    expect_only_marker_left(*c, "acc");
}

TEST_F(outcomes, released_is_redelivered_in_place_without_counting) {
    start_broker();
    auto c = connect();
    send_texts(*c, "rel", 3);
    test_receiver r = c->open_receiver("rel", receiver_credit(0));
    r.add_credit(1);
    ASSERT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
    r.settle(0, settle_as::release);
    sync_with_broker(*c); // the release must arrive before the new credit
    r.add_credit(1);
    auto got = r.wait_messages(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(body_of(got[1]), "m0") << "a released message must come back at its place";
    EXPECT_EQ(got[1].msg.delivery_count(), 0u) << "released must not increment delivery-count";
    r.settle(1, settle_as::accept);
    r.add_credit(2);
    got = r.wait_messages(4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(body_of(got[2]), "m1");
    EXPECT_EQ(body_of(got[3]), "m2");
    r.settle_all(settle_as::accept);
}

TEST_F(outcomes, modified_delivery_failed_is_redelivered_with_delivery_count_1) {
    start_broker();
    auto c = connect();
    send_texts(*c, "mod", 2);
    test_receiver r = c->open_receiver("mod", receiver_credit(0));
    r.add_credit(1);
    auto got = r.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].msg.delivery_count(), 0u);
    r.settle(0, settle_as::modified_failed);
    sync_with_broker(*c); // the outcome must arrive before the new credit
    r.add_credit(1);
    got = r.wait_messages(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(body_of(got[1]), "m0");
    EXPECT_EQ(got[1].msg.delivery_count(), 1u);
    EXPECT_FALSE(got[1].msg.first_acquirer());
    r.settle_all(settle_as::accept);
}

TEST_F(outcomes, modified_undeliverable_here_goes_to_another_link) {
    start_broker();
    auto c = connect();
    send_texts(*c, "undeliv", 1);
    test_receiver r1 = c->open_receiver("undeliv", receiver_credit(0));
    r1.add_credit(1);
    ASSERT_EQ(bodies(r1.wait_messages(1)), expected_texts(0, 1));
    r1.settle(0, settle_as::modified_undeliverable);
    r1.add_credit(1);
    test_receiver r2 = c->open_receiver("undeliv", receiver_credit(10));
    auto got = r2.wait_messages(1);
    ASSERT_EQ(got.size(), 1u) << "the message did not reach the other link";
    EXPECT_EQ(body_of(got[0]), "m0");
    EXPECT_EQ(r1.message_count(), 1u) << "redelivered to the link that said undeliverable-here";
    r2.settle_all(settle_as::accept);
}

// AMQP 1.0 §3.4.5: a modified outcome's message-annotations are combined
// with the message's own (a key it has takes the new value, the others are
// added), and the message keeps everything else.
TEST_F(outcomes, modified_annotations_are_combined_with_the_messages_own) {
    start_broker();
    auto c = connect();
    {
        test_sender s = c->open_sender("annotated");
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        proton::message m = text_message("m0");
        m.message_annotations().put(proton::symbol("x-opt-kept"), "as sent");
        m.message_annotations().put(proton::symbol("x-opt-reason"), "none yet");
        m.properties().put("app", "prop");
        s.send(m);
        ASSERT_EQ(s.wait_outcomes(1).at(0).kind, outcome_kind::accepted);
    }
    test_receiver r = c->open_receiver("annotated", receiver_credit(0));
    r.add_credit(1);
    ASSERT_EQ(r.wait_messages(1).size(), 1u);
    r.modify(0, true, {{"x-opt-reason", "retry later"}, {"x-opt-tries", "1"}});
    sync_with_broker(*c); // the outcome must arrive before the new credit
    r.add_credit(1);
    auto got = r.wait_messages(2);
    ASSERT_EQ(got.size(), 2u);
    const proton::message& back = got[1].msg;
    EXPECT_EQ(body_of(got[1]), "m0");
    EXPECT_EQ(back.delivery_count(), 1u);
    auto annotation = [&](const char* key) {
        proton::value v = back.message_annotations().get(proton::symbol(key));
        return v.empty() ? std::string("(none)") : proton::get<std::string>(v);
    };
    EXPECT_EQ(annotation("x-opt-kept"), "as sent");
    EXPECT_EQ(annotation("x-opt-reason"), "retry later") << "the outcome's value replaces the message's";
    EXPECT_EQ(annotation("x-opt-tries"), "1") << "a new key is added";
    EXPECT_EQ(back.message_annotations().size(), 3u);
    EXPECT_EQ(proton::get<std::string>(back.properties().get("app")), "prop");
    r.settle_all(settle_as::accept);
}

// Annotation keys are symbols or ulongs (AMQP 1.0 §3.2.10): a map with
// string keys ends the consumer's link with amqp:invalid-field, and the
// message goes back as the outcome says, without them.
TEST_F(outcomes, modified_annotations_with_string_keys_end_the_link_with_invalid_field) {
    start_broker();
    auto c = connect();
    send_texts(*c, "bad-annotations", 1);
    test_receiver r = c->open_receiver("bad-annotations", receiver_credit(0));
    r.add_credit(1); // (no more: the message must not go out again to this link)
    ASSERT_EQ(r.wait_messages(1).size(), 1u);
    r.modify(0, true, {{"x-opt-reason", "retry later"}}, true);
    expect_condition(r.wait_error(), "amqp:invalid-field", "symbols or ulongs");
    test_receiver again = c->open_receiver("bad-annotations", receiver_credit(1));
    auto got = again.wait_messages(1);
    ASSERT_EQ(got.size(), 1u) << "the message was lost";
    EXPECT_EQ(body_of(got[0]), "m0");
    EXPECT_EQ(got[0].msg.delivery_count(), 1u) << "the outcome was not applied";
    EXPECT_TRUE(got[0].msg.message_annotations().empty());
    again.settle_all(settle_as::accept);
}

TEST_F(outcomes, rejected_goes_to_the_dead_letter_queue) {
    start_broker();
    auto c = connect();
    send_texts(*c, "rej", 1);
    test_receiver r = c->open_receiver("rej", receiver_credit(10));
    ASSERT_EQ(bodies(r.wait_messages(1)), expected_texts(0, 1));
    r.settle(0, settle_as::reject);
    test_receiver dlq = c->open_receiver("DLQ", receiver_credit(10));
    auto dead = dlq.wait_messages(1);
    ASSERT_EQ(dead.size(), 1u) << "rejected message did not appear on DLQ";
    EXPECT_EQ(body_of(dead[0]), "m0");
    dlq.settle_all(settle_as::accept);
    r.close();
    expect_only_marker_left(*c, "rej");
}

TEST_F(outcomes, rejected_goes_to_the_configured_dead_letter_queue) {
    start_broker({.config_toml = "[[queue]]\nname = \"orders\"\n"
                                 "dead-letter-queue = \"orders.dlq\"\n"});
    auto c = connect();
    send_texts(*c, "orders", 1);
    test_receiver r = c->open_receiver("orders", receiver_credit(10));
    ASSERT_EQ(r.wait_messages(1).size(), 1u);
    r.settle(0, settle_as::reject);
    test_receiver dlq = c->open_receiver("orders.dlq", receiver_credit(10));
    auto dead = dlq.wait_messages(1);
    ASSERT_EQ(dead.size(), 1u) << "rejected message did not appear on orders.dlq";
    EXPECT_EQ(body_of(dead[0]), "m0");
}

TEST_F(outcomes, max_delivery_count_dead_letters_after_n_deliveries) {
    start_broker({.config_toml = "[[queue]]\nname = \"mdc\"\nmax-delivery-count = 3\n"
                                 "dead-letter-queue = \"mdc.dlq\"\n"});
    auto c = connect();
    send_texts(*c, "mdc", 1);
    test_receiver r = c->open_receiver("mdc", receiver_credit(0));
    test_receiver dlq = c->open_receiver("mdc.dlq", receiver_credit(10));
    ASSERT_TRUE(dlq.wait_open()) << dlq.wait_error();
    size_t deliveries = 0;
    for (int round = 0; round < 12 && dlq.message_count() == 0; ++round) {
        r.add_credit(1);
        ASSERT_TRUE(eventually([&] {
            return r.message_count() > deliveries || dlq.message_count() > 0;
        })) << "neither a redelivery nor a dead letter after delivery " << deliveries;
        if (r.message_count() > deliveries) {
            auto got = r.messages();
            EXPECT_EQ(got[deliveries].msg.delivery_count(), deliveries);
            r.settle(deliveries, settle_as::modified_failed);
            ++deliveries;
        }
    }
    EXPECT_EQ(deliveries, 3u) << "max-delivery-count = 3";
    auto dead = dlq.wait_messages(1);
    ASSERT_EQ(dead.size(), 1u) << "message never reached mdc.dlq";
    EXPECT_EQ(body_of(dead[0]), "m0");
}

TEST_F(outcomes, unsettled_deliveries_of_a_closed_connection_come_back_counted) {
    start_broker();
    auto p = connect();
    send_texts(*p, "unsettled", 3);
    {
        auto c1 = connect();
        test_receiver r1 = c1->open_receiver("unsettled", receiver_credit(10));
        ASSERT_EQ(bodies(r1.wait_messages(3)), expected_texts(0, 3));
        // c1 closes its connection with all three unsettled.
    }
    auto c2 = connect();
    test_receiver r2 = c2->open_receiver("unsettled", receiver_credit(10));
    auto got = r2.wait_messages(3);
    ASSERT_EQ(bodies(got), expected_texts(0, 3));
    for (const auto& m : got) {
        EXPECT_EQ(m.msg.delivery_count(), 1u) << body_of(m);
        EXPECT_FALSE(m.msg.first_acquirer()) << body_of(m);
    }
    r2.settle_all(settle_as::accept);
}

TEST_F(outcomes, unsettled_deliveries_of_a_closed_link_come_back_counted) {
    start_broker();
    auto c = connect();
    send_texts(*c, "unsettled-link", 2);
    test_receiver r1 = c->open_receiver("unsettled-link", receiver_credit(10));
    ASSERT_EQ(bodies(r1.wait_messages(2)), expected_texts(0, 2));
    r1.close();
    ASSERT_TRUE(r1.wait_closed());
    test_receiver r2 = c->open_receiver("unsettled-link", receiver_credit(10));
    auto got = r2.wait_messages(2);
    ASSERT_EQ(bodies(got), expected_texts(0, 2));
    for (const auto& m : got) {
        EXPECT_EQ(m.msg.delivery_count(), 1u) << body_of(m);
        EXPECT_FALSE(m.msg.first_acquirer()) << body_of(m);
    }
}

TEST_F(outcomes, presettled_consumer_removes_on_send) {
    start_broker();
    auto c = connect();
    send_texts(*c, "at-most-once", 5);
    proton::receiver_options ro = receiver_credit(10);
    ro.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    test_receiver r = c->open_receiver("at-most-once", ro);
    auto got = r.wait_messages(5);
    ASSERT_EQ(bodies(got), expected_texts(0, 5));
    for (const auto& m : got) EXPECT_TRUE(m.settled_by_sender) << body_of(m);
    r.close();
    ASSERT_TRUE(r.wait_closed());
    expect_only_marker_left(*c, "at-most-once");
}

} // namespace
} // namespace wharf::server::test
