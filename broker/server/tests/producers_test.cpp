// Producer credit and settlement: a batch of credit at attach, unsettled
// transfers settled accepted, pre-settled transfers delivered.

#include "broker/server/tests/component_test.hpp"
#include "broker/server/tests/raw_peer.hpp"

#include <proton/delivery_mode.hpp>
#include <proton/source_options.hpp>

namespace wharf::server::test {
namespace {

class producers : public component_test {
  protected:
    // A node whose connections' producers share `budget` (windows of 100),
    // one client, two producers on it (to `first` and `second`) that hold
    // at least `each` credit, and a third to `second` opened after them.
    struct three_producers {
        std::unique_ptr<test_client> c;
        test_sender first, second, late;
    };
    three_producers open_three(int budget, const std::string& first, const std::string& second, int each) {
        start_broker({.args = {"--credit-window", "100", "--connection-credit-budget", std::to_string(budget)}});
        auto c = connect();
        auto credited = [&](const std::string& address) {
            test_sender s = c->open_sender(address);
            EXPECT_TRUE(s.wait_open()) << address << ": " << s.wait_error();
            EXPECT_TRUE(s.wait_credit_at_least(each)) << address << ": " << s.credit();
            return s;
        };
        test_sender a = credited(first);
        test_sender b = credited(second);
        test_sender late = c->open_sender(second);
        EXPECT_TRUE(late.wait_open()) << late.wait_error();
        return {std::move(c), a, b, late};
    }
};

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

// The producers of one connection share its connection-credit-budget: with
// two holding the whole of it and sending nothing, a third gets its part
// once what they hold beyond their part stops counting (at the next tick),
// and every message is accepted.
TEST_F(producers, a_connections_producers_share_its_credit_budget) {
    auto [c, a, b, late] = open_three(200, "pool-q", "pool-q", 100);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(late.wait_credit_at_least(20)) << "idle neighbours' credit kept it waiting";
    EXPECT_LE(late.credit(), 200 / 3) << "its even part of the budget";
    EXPECT_EQ(a.credit() + b.credit(), 200) << "the idle ones keep what they hold";
    for (int i = 0; i < 60; ++i) late.send(text_message("late" + std::to_string(i)));
    auto outs = late.wait_outcomes(60);
    ASSERT_EQ(outs.size(), 60u) << "the third producer got more credit than its first part";
    for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i].kind, outcome_kind::accepted) << "message " << i;
    a.send(text_message("a"));
    b.send(text_message("b"));
    ASSERT_EQ(a.wait_outcomes(1).size(), 1u);
    ASSERT_EQ(b.wait_outcomes(1).size(), 1u);
    test_receiver r = c->open_receiver("pool-q", receiver_credit(100));
    EXPECT_EQ(r.wait_messages(62).size(), 62u);
    r.settle_all(settle_as::accept);
}

// The node's producer-credit-budget bounds its producers' credit across
// connections too: a connection that opens producers while another's pool
// holds credit gets its share of the node's budget (40 over two
// connections: 20), not its own budget's worth (three producers of 20
// each), and every message of both still gets through, in turns.
TEST_F(producers, connections_share_the_nodes_producer_budget) {
    start_broker({.args = {"--credit-window", "100", "--producer-credit-budget", "40",
                           "--connection-credit-budget", "200"}});
    auto open_three_on = [](test_client& c, const std::string& address) {
        std::vector<test_sender> s;
        for (int i = 0; i < 3; ++i) {
            s.push_back(c.open_sender(address));
            EXPECT_TRUE(s.back().wait_open()) << address << ": " << s.back().wait_error();
        }
        return s;
    };
    auto total = [](std::vector<test_sender>& s) {
        int n = 0;
        for (auto& x : s) n += std::max(0, x.credit());
        return n;
    };
    auto a = connect();
    std::vector<test_sender> first = open_three_on(*a, "node-budget-a");
    ASSERT_TRUE(first[0].wait_credit_at_least(20)) << first[0].credit();
    auto b = connect();
    std::vector<test_sender> second = open_three_on(*b, "node-budget-b");
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(eventually([&] { return total(second) >= 20; })) << total(second);
    EXPECT_LE(total(second), 20) << "its share of the node's 40, not three producers x 20";

    constexpr int n = 30; // two turns of 20 each
    for (int j = 0; j < n; ++j)
        for (auto* group : {&first, &second})
            for (auto& s : *group) s.send(text_message(std::to_string(j)));
    for (auto* group : {&first, &second})
        for (size_t i = 0; i < group->size(); ++i) {
            auto outs = (*group)[i].wait_outcomes(n);
            ASSERT_EQ(outs.size(), static_cast<size_t>(n)) << "producer " << i;
            for (const auto& o : outs) EXPECT_EQ(o.kind, outcome_kind::accepted) << "producer " << i;
        }
    for (const char* address : {"node-budget-a", "node-budget-b"}) {
        test_receiver r = a->open_receiver(address, receiver_credit(100));
        EXPECT_EQ(r.wait_messages(3 * n).size(), static_cast<size_t>(3 * n)) << address;
        r.settle_all(settle_as::accept);
    }
}

// Thirty producers on a connection whose budget fits ten windows' worth of
// a chunk: they take turns, and every message of each arrives, in its order.
TEST_F(producers, thirty_producers_on_one_connection_all_get_through_in_turns) {
    start_broker({.args = {"--credit-window", "100", "--connection-credit-budget", "200"}});
    auto c = connect();
    constexpr int producers_n = 30, each = 50;
    std::vector<test_sender> senders;
    for (int i = 0; i < producers_n; ++i) {
        senders.push_back(c->open_sender("turns-q"));
        ASSERT_TRUE(senders.back().wait_open()) << senders.back().wait_error();
    }
    for (int j = 0; j < each; ++j)
        for (int i = 0; i < producers_n; ++i)
            senders[static_cast<size_t>(i)].send(text_message(std::to_string(i) + "-" + std::to_string(j)));
    for (int i = 0; i < producers_n; ++i) {
        auto outs = senders[static_cast<size_t>(i)].wait_outcomes(each);
        ASSERT_EQ(outs.size(), static_cast<size_t>(each)) << "producer " << i;
        for (const auto& o : outs) ASSERT_EQ(o.kind, outcome_kind::accepted) << "producer " << i;
    }
    test_receiver r = c->open_receiver("turns-q", receiver_credit(200));
    auto got = r.wait_messages(producers_n * each);
    ASSERT_EQ(got.size(), static_cast<size_t>(producers_n * each));
    std::vector<int> next(producers_n, 0);
    for (const auto& m : bodies(got)) {
        const auto dash = m.find('-');
        const int i = std::stoi(m.substr(0, dash)), j = std::stoi(m.substr(dash + 1));
        EXPECT_EQ(j, next[static_cast<size_t>(i)]++) << "producer " << i << " out of order";
    }
    r.settle_all(settle_as::accept);
}

// A producer whose queue is deleted while its neighbours wait for credit:
// what it held goes back to them, and after it detaches the node goes on
// serving the connection's line (it no longer counts or looks at the link).
TEST_F(producers, a_deleted_queues_producer_leaves_the_connections_credit_to_the_others) {
    auto [c, gone, kept, late] = open_three(40, "gone-q", "kept-q", 20);
    ASSERT_FALSE(HasFailure());

    proton::source_options temporary; // replies come to a queue of the node the client talks to
    temporary.dynamic(true);
    proton::receiver_options ro = receiver_credit(10);
    ro.source(temporary);
    test_receiver replies = c->open_receiver("", ro);
    ASSERT_TRUE(replies.wait_open()) << replies.wait_error();
    test_sender mgmt = c->open_sender("$management");
    ASSERT_TRUE(mgmt.wait_open()) << mgmt.wait_error();
    proton::message del;
    del.properties().put("operation", "DELETE");
    del.properties().put("type", "wharf.queue");
    del.properties().put("name", "gone-q");
    del.reply_to(replies.remote_source_address());
    mgmt.send(del);
    auto answer = replies.wait_messages(1);
    ASSERT_EQ(answer.size(), 1u);
    EXPECT_EQ(proton::get<int32_t>(answer[0].msg.properties().get("statusCode")), 204);
    auto err = gone.wait_error();
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->description.find("was deleted"), std::string::npos) << err;
    gone.close();
    ASSERT_TRUE(gone.wait_closed());

    constexpr int n = 60; // three turns of 20 for late
    for (int i = 0; i < n; ++i) late.send(text_message("late" + std::to_string(i)));
    auto outs = late.wait_outcomes(n);
    ASSERT_EQ(outs.size(), static_cast<size_t>(n)) << "the line stopped after a producer left";
    for (const auto& o : outs) EXPECT_EQ(o.kind, outcome_kind::accepted);
    kept.send(text_message("kept"));
    ASSERT_EQ(kept.wait_outcomes(1).size(), 1u);
    test_receiver r = c->open_receiver("kept-q", receiver_credit(100));
    EXPECT_EQ(r.wait_messages(n + 1).size(), static_cast<size_t>(n + 1));
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

// A pre-settled producer that sends and detaches at once: everything it
// sent before the detach is stored (relayed: the relay sends what waits for
// the owner before it passes the detach on).
TEST_F(producers, presettled_messages_sent_right_before_a_detach_arrive) {
    start_broker();
    auto c = connect();
    proton::sender_options so;
    so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    test_sender s = c->open_sender("presettled-then-detach", so);
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    ASSERT_TRUE(s.wait_credit_at_least(50)) << s.credit();
    std::vector<proton::message> ms;
    for (int i = 0; i < 50; ++i) ms.push_back(text_message("m" + std::to_string(i)));
    s.send_and_close(ms);
    ASSERT_TRUE(s.wait_closed());
    test_receiver r = c->open_receiver("presettled-then-detach", receiver_credit(100));
    EXPECT_EQ(bodies(r.wait_messages(50)), expected_texts(0, 50));
}

// A producer that aborts a message it has begun (a transfer with
// aborted=true, AMQP 1.0 §2.6.14) spent a credit and the node stored
// nothing: the node gives the credit back, or with a window of one the
// link would starve for good.
TEST_F(producers, an_aborted_message_gives_its_credit_back) {
    start_broker({.args = {"--credit-window", "1", "--max-frame-size", "4096"}});
    auto c = connect();
    test_sender s = c->open_sender("aborts");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    ASSERT_TRUE(s.wait_credit_at_least(1));
    ASSERT_TRUE(s.begin_unfinished(std::string(10000, 'x'))); // three frames, and more to come
    sync_with_broker(*c);                                      // the node has its frames
    ASSERT_TRUE(s.abort_unfinished());
    EXPECT_TRUE(s.wait_credit_at_least(1)) << "no credit after an aborted message";
    s.send(text_message("after the abort"));
    s.send(text_message("and one more"));
    auto outs = s.wait_outcomes(2);
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].kind, outcome_kind::accepted);
    EXPECT_EQ(outs[1].kind, outcome_kind::accepted);
    test_receiver r = c->open_receiver("aborts", receiver_credit(10));
    EXPECT_EQ(bodies(r.wait_messages(2)), (std::vector<std::string>{"after the abort", "and one more"}));
}

// A client that opens a transaction coordinator (Qpid JMS for a transacted
// session) hears at attach that there are no transactions, rather than
// having its declare refused as a message without an address.
TEST_F(producers, a_transaction_coordinator_is_refused_with_not_implemented) {
    start_broker();
    raw_peer peer(broker().url());
    pn_link_t* coordinator = peer.open_coordinator();
    ASSERT_TRUE(peer.run_until([&] { return peer.remote_closed(coordinator); })) << peer.error();
    pn_condition_t* cond = pn_link_remote_condition(coordinator);
    ASSERT_TRUE(pn_condition_is_set(cond));
    EXPECT_STREQ(pn_condition_get_name(cond), "amqp:not-implemented");
    EXPECT_NE(std::string(pn_condition_get_description(cond)).find("transactions are not supported"), std::string::npos)
        << pn_condition_get_description(cond);
}

} // namespace
} // namespace wharf::server::test
