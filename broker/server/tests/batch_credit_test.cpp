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

} // namespace
} // namespace wharf::server::test
