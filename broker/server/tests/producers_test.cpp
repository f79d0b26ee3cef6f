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

// Many producers share the node's producer-credit-budget: the 30th of
// 30 gets 1000 / 30 credits, not the whole credit-window, and can still
// send; once most have left, a new one gets the whole window again.
TEST_F(producers, many_producers_share_the_node_credit_budget) {
    start_broker({.args = {"--credit-window", "100", "--producer-credit-budget", "1000"}});
    auto c = connect();
    std::vector<test_sender> senders;
    for (int i = 0; i < 30; ++i) {
        senders.push_back(c->open_sender("budget-q"));
        ASSERT_TRUE(senders.back().wait_open()) << senders.back().wait_error();
        ASSERT_TRUE(senders.back().wait_credit_at_least(20)) << "sender " << i << ": " << senders.back().credit();
    }
    EXPECT_EQ(senders.front().credit(), 100) << "the first producers get the whole window";
    EXPECT_LE(senders.back().credit(), 1000 / 30) << "the 30th gets its share of the budget";
    for (auto& s : senders) s.send(text_message("from a producer"));
    for (size_t i = 0; i < senders.size(); ++i) {
        auto outs = senders[i].wait_outcomes(1);
        ASSERT_EQ(outs.size(), 1u) << "sender " << i;
        EXPECT_EQ(outs[0].kind, outcome_kind::accepted) << "sender " << i;
    }
    for (size_t i = 5; i < senders.size(); ++i) {
        senders[i].close();
        ASSERT_TRUE(senders[i].wait_closed()) << "sender " << i;
    }
    test_sender again = c->open_sender("budget-q");
    ASSERT_TRUE(again.wait_open()) << again.wait_error();
    EXPECT_TRUE(again.wait_credit_at_least(100)) << "with 6 producers open: " << again.credit();
    test_receiver r = c->open_receiver("budget-q", receiver_credit(50));
    EXPECT_EQ(r.wait_messages(30).size(), 30u);
    r.settle_all(settle_as::accept);
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
