// What a node gives another node's relay that sends it a producer's
// messages in batches (broker/server/relay_batch.hpp), seen on the wire by
// a raw peer that speaks as that relay: the node that owns the queue (in
// relay mode, the pair's owner).

#include "broker/server/tests/component_test.hpp"
#include "broker/server/tests/raw_peer.hpp"

#include <proton/condition.h>
#include <proton/connection.h>

#include <algorithm>

namespace wharf::server::test {
namespace {

class batch_credit : public component_test {
  protected:
    wharfd_process& queue_owner() { return relay_mode() ? owner() : broker(); }
};

void put_be(std::string& out, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_be(const std::string& in, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + static_cast<size_t>(i)]);
    return v;
}

// A batch: [u8 flags][u32 length][the message] for each message.
std::string batch_of(const std::string& message, uint64_t n) {
    std::string out;
    for (uint64_t i = 0; i < n; ++i) {
        out.push_back(0); // not pre-settled
        put_be(out, message.size(), 4);
        out += message;
    }
    return out;
}

// The highest credit limit that control records give link `link`:
// [u8 kind: 1 = credit][u64 link][u64 limit][u8 drain], one after another.
uint64_t limit_in(const std::vector<std::string>& deliveries, uint64_t link, uint64_t limit) {
    for (const std::string& d : deliveries)
        for (size_t at = 0; at + 18 <= d.size(); at += 18)
            if (d[at] == 1 && get_be(d, at + 1, 8) == link) limit = std::max(limit, get_be(d, at + 9, 8));
    return limit;
}

// Proton counts a batch as one delivery while the owner's window counts its
// messages. The owner's credit on the wire must stay within its window
// however many messages the link has carried: when it counted the messages
// as Proton's credit, it advertised window + every message beyond one a
// delivery ever sent (50,000 messages here: about 50,000 credits), and
// Proton's int credit overflowed after about 2^31 messages, stalling the
// producer for good.
TEST_F(batch_credit, the_owners_credit_for_a_relays_batches_stays_within_its_window) {
    start_broker({.args = {"--credit-window", "1000"}});
    raw_peer relay(queue_owner().url());
    pn_link_t* credits = relay.open_receiver("$wharf.relay-credit", 100);
    constexpr uint64_t link = 7;
    pn_link_t* s = relay.open_sender("batched", {{"wharf:relay-batch", "64"},
                                                 {"wharf:relay-link", std::to_string(link)},
                                                 {"wharf:relay-credit", "records"}});
    ASSERT_TRUE(relay.run_until([&] { return relay.remote_opened(s); })) << relay.error();
    ASSERT_EQ(relay.remote_property(s, "wharf:relay-batch"), "64") << "the owner did not take batches";
    const bool records = relay.remote_property(s, "wharf:relay-credit") == "records";
    EXPECT_TRUE(records) << "the owner did not agree to send credit as records";

    std::string message;
    {
        std::vector<char> bytes;
        text_message("batched message").encode(bytes);
        message.assign(bytes.begin(), bytes.end());
    }
    constexpr uint64_t total = 50000;
    uint64_t limit = 0, sent = 0, deliveries = 0;
    // The messages the owner allows now (without records: Proton's credit
    // counts them, over the deliveries so far).
    auto allowed = [&]() -> uint64_t {
        if (records) limit = limit_in(relay.take_received(credits), link, limit);
        else limit = deliveries + static_cast<uint64_t>(std::max(0, pn_link_credit(s)));
        return limit > sent ? limit - sent : 0;
    };
    while (sent < total) {
        ASSERT_TRUE(relay.run_until([&] { return allowed() > 0; }))
            << "no credit for more after " << sent << " messages " << relay.error();
        const uint64_t n = std::min({allowed(), uint64_t{64}, total - sent});
        relay.send(s, batch_of(message, n));
        ++deliveries;
        sent += n;
    }
    ASSERT_TRUE(relay.run_until([&] { return relay.settled(s) == deliveries; }, std::chrono::seconds(30)))
        << relay.settled(s) << " of " << deliveries << " batches answered " << relay.error();
    EXPECT_EQ(relay.accepted(s), deliveries);
    EXPECT_LE(relay.max_credit(s), 1000) << "the owner's Proton credit grew beyond its window";
}

// A delivery on a batch link that is not a batch (a relay's bug, or bytes
// damaged on the way) loses how many messages it stood for, and so the
// credit both ends count: the owner ends the link with amqp:decode-error
// rather than let the counts drift until the producer stalls.
TEST_F(batch_credit, a_malformed_batch_ends_the_link_with_decode_error) {
    start_broker();
    raw_peer relay(queue_owner().url());
    relay.open_receiver("$wharf.relay-credit", 100);
    pn_link_t* s = relay.open_sender("malformed", {{"wharf:relay-batch", "64"},
                                                   {"wharf:relay-link", "9"},
                                                   {"wharf:relay-credit", "records"}});
    ASSERT_TRUE(relay.run_until([&] { return relay.remote_opened(s); })) << relay.error();
    ASSERT_EQ(relay.remote_property(s, "wharf:relay-batch"), "64") << "the owner did not take batches";
    std::string bad = batch_of("x", 1);
    bad.resize(bad.size() - 1); // its one record claims a byte more than there is
    relay.send(s, bad);
    ASSERT_TRUE(relay.run_until([&] { return (pn_link_state(s) & PN_REMOTE_CLOSED) != 0; }))
        << "the link stayed open " << relay.error();
    pn_condition_t* c = pn_link_remote_condition(s);
    EXPECT_STREQ(pn_condition_get_name(c), "amqp:decode-error");
    EXPECT_NE(std::string(pn_condition_get_description(c)).find("malformed"), std::string::npos)
        << pn_condition_get_description(c);
    EXPECT_FALSE(relay.ended()) << "the connection stays up: " << relay.error();
}

// A batch with more records than the attach agreed on (64) is not one a
// relay made: a client posing as a relay sent 20,000 in one delivery, the
// owner's answer (a disposition listing each record's failure) outgrew any
// frame, and the transfer was never answered.
TEST_F(batch_credit, a_batch_larger_than_agreed_ends_the_link_with_decode_error) {
    start_broker();
    raw_peer relay(queue_owner().url());
    relay.open_receiver("$wharf.relay-credit", 100);
    pn_link_t* s = relay.open_sender("too-many", {{"wharf:relay-batch", "64"},
                                                  {"wharf:relay-link", "10"},
                                                  {"wharf:relay-credit", "records"}});
    ASSERT_TRUE(relay.run_until([&] { return relay.remote_opened(s); })) << relay.error();
    ASSERT_EQ(relay.remote_property(s, "wharf:relay-batch"), "64") << "the owner did not take batches";
    relay.send(s, batch_of("x", 65));
    ASSERT_TRUE(relay.run_until([&] { return (pn_link_state(s) & PN_REMOTE_CLOSED) != 0; }))
        << "the link stayed open " << relay.error();
    EXPECT_STREQ(pn_condition_get_name(pn_link_remote_condition(s)), "amqp:decode-error");
    EXPECT_FALSE(relay.ended()) << "the connection stays up: " << relay.error();
    // None of the 65 was queued: a message sent now is the first out.
    auto c = connect();
    send_texts(*c, "too-many", 1, "after");
    test_receiver r = c->open_receiver("too-many", receiver_credit(10));
    ASSERT_TRUE(r.wait_open());
    auto got = r.wait_messages(1);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(body_of(got.front()), "after0");
}

// The messages in a relay's consumer batches: records of [u8 flags][u64
// sequence number][u32 length][the bytes] (relay_batch.hpp).
size_t records_in(const std::vector<std::string>& deliveries) {
    size_t n = 0;
    for (const std::string& d : deliveries)
        for (size_t at = 0; at + 13 <= d.size(); at += 13 + get_be(d, at + 9, 4)) ++n;
    return n;
}

// A relay's at-most-once consumer: the owner keeps what it passed on until
// the relay answers. A relay's plain detach comes after its answers for
// everything its client got, so what is unanswered then never reached the
// client and goes back to the queue. A relay that ends the link saying its
// answers are lost (wharf:relay-answers-lost: its own link for them ended)
// may have passed those on: they count as sent, never to go twice. Before,
// a relay that lost its control link left the owner's links open for good,
// and a queue move waited for them for ever.
TEST_F(batch_credit, presettled_messages_unanswered_at_a_relays_detach) {
    start_broker();
    auto c = connect();
    for (const bool lost : {false, true}) {
        const std::string q = std::string("amo-relayed-") + (lost ? "lost" : "answered");
        send_texts(*c, q, 10);
        raw_peer relay(queue_owner().url());
        pn_link_t* acks = relay.open_sender("$wharf.relay-acks");
        constexpr uint64_t link = 11;
        pn_link_t* r = relay.open_receiver(q, 100, /*presettled=*/true, true, 0,
                                           {{"wharf:relay-batch", "64"},
                                            {"wharf:relay-link", std::to_string(link)},
                                            {"wharf:relay-presettled", "acks detach"}});
        ASSERT_TRUE(relay.run_until([&] { return relay.remote_opened(r) && relay.remote_opened(acks); }))
            << relay.error();
        ASSERT_EQ(relay.remote_property(r, "wharf:relay-presettled"), "acks") << "the owner takes no answers";
        std::string credit{1}; // [u8 kind: credit][u64 link][u64 limit: 10 messages][u8 drain]
        put_be(credit, link, 8);
        put_be(credit, 10, 8);
        credit.push_back(0);
        relay.send(acks, credit);
        size_t got = 0;
        ASSERT_TRUE(relay.run_until([&] {
            got += records_in(relay.take_received(r));
            return got >= 10;
        })) << relay.error() << " (" << got << " messages)";
        if (lost) pn_condition_set_name(pn_link_condition(r), "wharf:relay-answers-lost");
        relay.close(r);
        ASSERT_TRUE(relay.run_until([&] { return relay.remote_closed(r); })) << relay.error();

        // What the queue holds now comes before a message sent after it.
        send_texts(*c, q, 1, "after");
        test_receiver rest = c->open_receiver(q, receiver_credit(100));
        ASSERT_TRUE(eventually([&] {
            auto ms = rest.messages();
            return !ms.empty() && body_of(ms.back()) == "after0";
        }));
        auto left = bodies(rest.messages());
        left.pop_back();
        EXPECT_EQ(left, lost ? std::vector<std::string>{} : expected_texts(0, 10)) << "lost " << lost;
        rest.settle_all(settle_as::accept);
        rest.close();
    }
}

} // namespace
} // namespace wharf::server::test
