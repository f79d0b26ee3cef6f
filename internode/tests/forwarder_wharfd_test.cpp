// The forwarder against a real wharfd: messages arrive unchanged and in order
// and are reported accepted; refusals (unknown queue, bytes that are not a
// message) come back as the broker's conditions without harming the rest.

#include "broker/server/tests/test_client.hpp"
#include "broker/server/tests/wharfd_process.hpp"
#include "internode/tests/forwarder_test_support.hpp"
#include "internode/tests/raw_receiver.hpp"

#include <proton/message.hpp>
#include <proton/scalar.hpp>

namespace wharf::internode::test {
namespace {

using server::test::receiver_credit;
using server::test::settle_as;
using server::test::test_client;
using server::test::wharfd_options;
using server::test::wharfd_process;

// Forwards `messages` to `address`, waits for every outcome and expects each
// accepted, reported once, off the calling thread.
void forward_all_accepted(uint16_t port, const std::string& address,
                          const std::vector<std::string>& messages) {
    outcome_log log;
    forwarder fwd(local_options(port));
    for (size_t i = 0; i < messages.size(); ++i) fwd.send(address, messages[i], log.callback(i));
    ASSERT_TRUE(log.wait_for_calls(messages.size()))
        << log.calls() << " of " << messages.size() << " reported";
    ASSERT_TRUE(log.exactly_once(messages.size()));
    const auto outs = log.outcomes(messages.size());
    for (size_t i = 0; i < outs.size(); ++i)
        ASSERT_EQ(outs[i].result, forward_result::accepted) << "message " << i << ": " << outs[i];
    EXPECT_EQ(fwd.in_flight(), 0u);
    EXPECT_FALSE(fwd.broken());
}

TEST(forwarder_to_wharfd, thousand_messages_are_accepted_and_a_client_receives_them_unchanged_in_order) {
    wharfd_process broker;
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    constexpr size_t n = 1000;
    std::vector<std::string> sent;
    for (size_t i = 0; i < n; ++i) sent.push_back(encoded_message(i));
    forward_all_accepted(broker.port(), "q", sent);

    test_client c(broker.url());
    ASSERT_TRUE(c.wait_open()) << c.error();
    auto r = c.open_receiver("q", receiver_credit(static_cast<int>(n)));
    const auto got = r.wait_messages(n);
    ASSERT_EQ(got.size(), n);
    for (size_t i = 0; i < n; ++i) {
        const proton::message& m = got[i].msg;
        ASSERT_EQ(proton::get<int64_t>(m.properties().get("index")), static_cast<int64_t>(i))
            << "out of order at " << i;
        EXPECT_EQ(m.subject(), "subject " + std::to_string(i % 7));
        EXPECT_FALSE(got[i].settled_by_sender);
        // Proton writes a message it decoded back to the same bytes it was
        // built from, so equal bytes mean every section arrived as forwarded.
        std::vector<char> again;
        m.encode(again);
        EXPECT_TRUE(std::string(again.begin(), again.end()) == sent[i]) << "message " << i << " changed";
    }
    r.settle_all(settle_as::accept);
    // Nothing more than the 1000.
    EXPECT_EQ(r.message_count(), n);
}

TEST(forwarder_to_wharfd, footers_and_multi_frame_messages_arrive_byte_exact) {
    wharfd_process broker;
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    std::vector<std::string> sent;
    for (size_t i = 0; i < 40; ++i) {
        // Every fourth is 300 KiB: several 64 KiB frames each way.
        std::string bytes = encoded_message(i, i % 4 == 0 ? 300 * 1024 : 0);
        if (i % 2 == 1) bytes = with_footer(std::move(bytes), i);
        sent.push_back(std::move(bytes));
    }
    forward_all_accepted(broker.port(), "raw", sent);

    const auto got = receive_raw("127.0.0.1", broker.port(), "raw", sent.size(), 20s);
    ASSERT_EQ(got.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i)
        EXPECT_TRUE(got[i] == sent[i])
            << "message " << i << " differs: " << got[i].size() << " bytes, sent " << sent[i].size();
}

TEST(forwarder_to_wharfd, bytes_that_are_not_a_message_are_rejected_and_the_link_goes_on) {
    wharfd_process broker;
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    outcome_log log;
    forwarder fwd(local_options(broker.port()));
    fwd.send("q", encoded_message(0), log.callback(0));
    fwd.send("q", "this is not an AMQP message", log.callback(1));
    fwd.send("q", encoded_message(2), log.callback(2));
    ASSERT_TRUE(log.wait_for_calls(3));
    EXPECT_TRUE(log.exactly_once(3));
    const auto outs = log.outcomes(3);
    EXPECT_EQ(outs[0].result, forward_result::accepted) << outs[0];
    EXPECT_EQ(outs[1].result, forward_result::rejected) << outs[1];
    EXPECT_NE(outs[1].description.find("amqp:decode-error"), std::string::npos) << outs[1];
    EXPECT_EQ(outs[2].result, forward_result::accepted) << outs[2];
    EXPECT_FALSE(fwd.broken());
}

TEST(forwarder_to_wharfd, unknown_queue_fails_with_not_found_and_other_addresses_still_work) {
    wharfd_process broker(wharfd_options{.config_toml = "auto-create-queues = false\n"
                                                        "[[queue]]\nname = \"good\"\n"});
    ASSERT_TRUE(broker.listening()) << broker.stderr_text();
    outcome_log log;
    forwarder fwd(local_options(broker.port()));
    fwd.send("missing", encoded_message(0), log.callback(0));
    fwd.send("missing", encoded_message(1), log.callback(1));
    ASSERT_TRUE(log.wait_for_calls(2));
    auto outs = log.outcomes(2);
    for (const auto& o : outs) {
        EXPECT_EQ(o.result, forward_result::failed) << o;
        EXPECT_NE(o.description.find("amqp:not-found"), std::string::npos) << o;
    }
    EXPECT_FALSE(fwd.broken()) << "a refused link must not end the connection";

    fwd.send("good", encoded_message(2), log.callback(2));
    fwd.send("missing", encoded_message(3), log.callback(3)); // a new attach, refused again
    ASSERT_TRUE(log.wait_for_calls(4));
    EXPECT_TRUE(log.exactly_once(4));
    outs = log.outcomes(4);
    EXPECT_EQ(outs[2].result, forward_result::accepted) << outs[2];
    EXPECT_EQ(outs[3].result, forward_result::failed) << outs[3];
    EXPECT_NE(outs[3].description.find("amqp:not-found"), std::string::npos) << outs[3];
    EXPECT_FALSE(fwd.broken());

    test_client c(broker.url());
    ASSERT_TRUE(c.wait_open()) << c.error();
    auto r = c.open_receiver("good", receiver_credit(10));
    const auto got = r.wait_messages(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(proton::get<int64_t>(got[0].msg.properties().get("index")), 2);
    r.settle_all(settle_as::accept);
}

} // namespace
} // namespace wharf::internode::test
