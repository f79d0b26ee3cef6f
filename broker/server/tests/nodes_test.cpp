// Special nodes and links: browsing (distribution-mode copy), dynamic
// temporary queues for request/reply, and the anonymous relay.

#include "broker/server/tests/component_test.hpp"

#include <proton/message_id.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>

#include <algorithm>

namespace wharf::server::test {
namespace {

class nodes : public component_test {};

proton::receiver_options browse_options() {
    proton::source_options so;
    so.distribution_mode(proton::source::COPY);
    proton::receiver_options ro = receiver_credit(10);
    ro.source(so);
    return ro;
}

proton::receiver_options dynamic_options() {
    proton::source_options so;
    so.dynamic(true);
    proton::receiver_options ro = receiver_credit(10);
    ro.source(so);
    return ro;
}

TEST_F(nodes, browsing_consumer_sees_messages_without_consuming_them) {
    start_broker();
    auto c = connect();
    send_texts(*c, "browsed", 3);
    test_receiver browser = c->open_receiver("browsed", browse_options());
    ASSERT_TRUE(browser.wait_open()) << browser.wait_error();
    EXPECT_EQ(bodies(browser.wait_messages(3)), expected_texts(0, 3));
    browser.settle_all(settle_as::accept); // accepting a browsed copy consumes nothing
    test_receiver consumer = c->open_receiver("browsed", receiver_credit(10));
    auto got = consumer.wait_messages(3);
    EXPECT_EQ(bodies(got), expected_texts(0, 3)) << "browsing consumed messages";
    for (const auto& m : got) EXPECT_EQ(m.msg.delivery_count(), 0u) << body_of(m);
    consumer.settle_all(settle_as::accept);
}

TEST_F(nodes, browsing_consumer_sees_new_messages_too) {
    start_broker();
    auto c = connect();
    test_receiver browser = c->open_receiver("browse-live", browse_options());
    ASSERT_TRUE(browser.wait_open()) << browser.wait_error();
    send_texts(*c, "browse-live", 2);
    EXPECT_EQ(bodies(browser.wait_messages(2)), expected_texts(0, 2));
    test_receiver consumer = c->open_receiver("browse-live", receiver_credit(10));
    EXPECT_EQ(bodies(consumer.wait_messages(2)), expected_texts(0, 2));
}

TEST_F(nodes, dynamic_receiver_gets_an_address_and_request_reply_works) {
    start_broker({.config_toml = "auto-create-queues = false\n[[queue]]\nname = \"service\"\n"});
    auto requester = connect();
    auto service = connect();

    test_receiver replies = requester->open_receiver("", dynamic_options());
    ASSERT_TRUE(replies.wait_open()) << replies.wait_error();
    const std::string reply_address = replies.remote_source_address();
    ASSERT_FALSE(reply_address.empty()) << "dynamic source got no address";

    test_receiver requests = service->open_receiver("service", receiver_credit(10));
    ASSERT_TRUE(requests.wait_open()) << requests.wait_error();
    test_sender responder = service->open_anonymous_sender();
    ASSERT_TRUE(responder.wait_open()) << responder.wait_error();

    test_sender ask = requester->open_sender("service");
    ASSERT_TRUE(ask.wait_open()) << ask.wait_error();
    proton::message request = text_message("question");
    request.reply_to(reply_address);
    request.correlation_id(proton::message_id("corr-1"));
    ask.send(request);
    ASSERT_EQ(ask.wait_outcome(0).kind, outcome_kind::accepted);

    auto got = requests.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].msg.reply_to(), reply_address);
    requests.settle(0, settle_as::accept);
    proton::message reply = text_message("answer", got[0].msg.reply_to());
    reply.correlation_id(got[0].msg.correlation_id());
    responder.send(reply);
    auto out = responder.wait_outcome(0);
    EXPECT_EQ(out.kind, outcome_kind::accepted) << out.condition;

    auto answers = replies.wait_messages(1);
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(body_of(answers[0]), "answer");
    EXPECT_EQ(answers[0].msg.correlation_id(), proton::message_id("corr-1"));

    // A sender can also attach to the temporary address while it exists.
    test_sender direct = service->open_sender(reply_address);
    EXPECT_TRUE(direct.wait_open()) << direct.wait_error();
    direct.close();
}

TEST_F(nodes, dynamic_queue_goes_away_when_its_link_closes) {
    start_broker({.args = {"--auto-create-queues", "false"}});
    auto c = connect();
    test_receiver temp = c->open_receiver("", dynamic_options());
    ASSERT_TRUE(temp.wait_open()) << temp.wait_error();
    const std::string address = temp.remote_source_address();
    ASSERT_FALSE(address.empty());
    test_receiver second = c->open_receiver("", dynamic_options());
    ASSERT_TRUE(second.wait_open());
    EXPECT_NE(second.remote_source_address(), address) << "dynamic addresses must be unique";

    temp.close();
    ASSERT_TRUE(temp.wait_closed());
    test_sender anon = c->open_anonymous_sender();
    ASSERT_TRUE(anon.wait_open()) << anon.wait_error();
    anon.send(text_message("late reply", address));
    auto out = anon.wait_outcome(0);
    EXPECT_EQ(out.kind, outcome_kind::rejected) << "the temporary queue still exists";
    ASSERT_TRUE(out.condition.has_value());
    EXPECT_EQ(out.condition->name, "amqp:not-found") << out.condition;
    test_sender direct = c->open_sender(address);
    auto err = direct.wait_error();
    ASSERT_TRUE(err.has_value()) << "attach to a removed temporary queue succeeded";
    EXPECT_EQ(err->name, "amqp:not-found");
}

TEST_F(nodes, connection_offers_anonymous_relay) {
    start_broker();
    auto c = connect();
    auto caps = c->offered_capabilities();
    EXPECT_NE(std::find(caps.begin(), caps.end(), "ANONYMOUS-RELAY"), caps.end())
        << "offered capabilities do not include ANONYMOUS-RELAY";
}

TEST_F(nodes, anonymous_sender_routes_by_to_and_survives_an_unknown_to) {
    start_broker({.config_toml = "auto-create-queues = false\n"
                                 "[[queue]]\nname = \"relay-a\"\n"
                                 "[[queue]]\nname = \"relay-b\"\n"});
    auto c = connect();
    test_sender anon = c->open_anonymous_sender();
    ASSERT_TRUE(anon.wait_open()) << anon.wait_error();
    anon.send(text_message("to-a", "relay-a"));
    anon.send(text_message("to-b", "relay-b"));
    anon.send(text_message("to-nowhere", "no-such-queue"));
    anon.send(text_message("to-a-again", "relay-a"));
    auto outs = anon.wait_outcomes(4);
    ASSERT_EQ(outs.size(), 4u);
    EXPECT_EQ(outs[0].kind, outcome_kind::accepted);
    EXPECT_EQ(outs[1].kind, outcome_kind::accepted);
    EXPECT_EQ(outs[2].kind, outcome_kind::rejected);
    ASSERT_TRUE(outs[2].condition.has_value()) << "rejected without a condition";
    EXPECT_EQ(outs[2].condition->name, "amqp:not-found") << outs[2].condition;
    EXPECT_EQ(outs[3].kind, outcome_kind::accepted) << "the link stopped working after a rejection";
    EXPECT_FALSE(c->error().has_value()) << c->error();

    test_receiver ra = c->open_receiver("relay-a", receiver_credit(10));
    test_receiver rb = c->open_receiver("relay-b", receiver_credit(10));
    auto got_a = ra.wait_messages(2);
    ASSERT_EQ(got_a.size(), 2u);
    EXPECT_EQ(body_of(got_a[0]), "to-a");
    EXPECT_EQ(body_of(got_a[1]), "to-a-again");
    auto got_b = rb.wait_messages(1);
    ASSERT_EQ(got_b.size(), 1u);
    EXPECT_EQ(body_of(got_b[0]), "to-b");
}

TEST_F(nodes, anonymous_sender_with_auto_create_creates_the_to_queue) {
    start_broker();
    auto c = connect();
    test_sender anon = c->open_anonymous_sender();
    ASSERT_TRUE(anon.wait_open()) << anon.wait_error();
    anon.send(text_message("hello", "made-by-relay"));
    auto out = anon.wait_outcome(0);
    EXPECT_EQ(out.kind, outcome_kind::accepted) << out.condition;
    test_receiver r = c->open_receiver("made-by-relay", receiver_credit(10));
    auto got = r.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(body_of(got[0]), "hello");
}


// A management request that names a queue as its reply-to: on a single node
// the answer arrives there. In a cluster, at a node that does not own that
// queue, the node cannot put the answer there (it neither makes nor relays
// into another node's queue), so it refuses the request before running it,
// saying why and what works instead, rather than running it and dropping
// the answer.
TEST_F(nodes, management_answers_into_a_named_queue_only_if_this_node_holds_it) {
    start_broker();
    auto c = connect();
    test_receiver replies = c->open_receiver("named-replies", receiver_credit(10));
    ASSERT_TRUE(replies.wait_open()) << replies.wait_error();
    test_sender mgmt = c->open_sender("$management");
    ASSERT_TRUE(mgmt.wait_open()) << mgmt.wait_error();
    proton::message req;
    req.id(std::string("q1"));
    req.properties().put("operation", "QUERY");
    req.properties().put("type", "wharf.queue");
    req.properties().put("name", "named-replies");
    req.reply_to("named-replies");
    mgmt.send(req);
    auto outs = mgmt.wait_outcomes(1);
    ASSERT_EQ(outs.size(), 1u);
    if (!relay_mode()) {
        EXPECT_EQ(outs[0].kind, outcome_kind::accepted);
        auto answer = replies.wait_messages(1);
        ASSERT_EQ(answer.size(), 1u);
        EXPECT_EQ(proton::get<int32_t>(answer[0].msg.properties().get("statusCode")), 200);
        return;
    }
    ASSERT_EQ(outs[0].kind, outcome_kind::rejected);
    ASSERT_TRUE(outs[0].condition.has_value());
    EXPECT_EQ(outs[0].condition->name, "amqp:invalid-field");
    const std::string& why = outs[0].condition->description;
    EXPECT_NE(why.find("reply-to 'named-replies' is a queue of node owner"), std::string::npos) << why;
    EXPECT_NE(why.find("temporary queue"), std::string::npos) << why;
}

} // namespace
} // namespace wharf::server::test
