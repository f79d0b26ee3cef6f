// Producer credit and settlement: a batch of credit at attach, unsettled
// transfers settled accepted, pre-settled transfers delivered.

#include "broker/server/tests/component_test.hpp"

#include <proton/delivery_mode.hpp>

namespace wharf::server::test {
namespace {

class producers : public component_test {};

TEST_F(producers, sender_gets_at_least_100_credit_at_attach) {
    start_broker();
    auto c = connect();
    test_sender s = c->open_sender("credit-q");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    EXPECT_TRUE(s.wait_credit_at_least(100)) << "credit after attach: " << s.credit();
}

TEST_F(producers, credit_window_flag_sets_the_batch) {
    start_broker({.args = {"--credit-window", "250"}});
    auto c = connect();
    test_sender s = c->open_sender("window-q");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    ASSERT_TRUE(s.wait_credit_at_least(250)) << "credit after attach: " << s.credit();
    EXPECT_EQ(s.credit(), 250);
}

TEST_F(producers, five_hundred_unsettled_messages_are_all_accepted_in_order) {
    start_broker();
    auto c = connect();
    test_sender s = c->open_sender("bulk");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    for (int i = 0; i < 500; ++i) s.send(text_message("m" + std::to_string(i)));
    auto outs = s.wait_outcomes(500);
    ASSERT_EQ(outs.size(), 500u);
    for (size_t i = 0; i < outs.size(); ++i)
        ASSERT_EQ(outs[i].kind, outcome_kind::accepted) << "message " << i;
    test_receiver r = c->open_receiver("bulk", receiver_credit(100));
    auto got = r.wait_messages(500);
    EXPECT_EQ(bodies(got), expected_texts(0, 500));
    r.settle_all(settle_as::accept);
}

TEST_F(producers, presettled_messages_arrive) {
    start_broker();
    auto c = connect();
    proton::sender_options so;
    so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    test_sender s = c->open_sender("presettled-in", so);
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    for (int i = 0; i < 20; ++i) s.send(text_message("m" + std::to_string(i)));
    test_receiver r = c->open_receiver("presettled-in", receiver_credit(50));
    EXPECT_EQ(bodies(r.wait_messages(20)), expected_texts(0, 20));
}

} // namespace
} // namespace wharf::server::test
