#pragma once
// Relay batches: how a peer connection sends a relayed producer's messages
// to the owner several to one delivery, so that neither node pays Proton's
// per-delivery cost (events, reference counting, delivery records, frame
// codec) for each message on the inter-node link.
//
// - Agreed per link. The twin's attach carries the link property
//   "wharf:relay-batch" = "N" (the most messages it puts in one delivery).
//   An owner that takes batches answers with the property too, with its N
//   (never larger). Without the answer (an older owner, an anonymous target,
//   a link the owner relays on again) every message is a delivery of its
//   own, as before.
// - A batch's bytes are records: [u8 flags: 1 = pre-settled][u32 length, big
//   endian][the message's bytes exactly as the client sent them].
// - A batch delivery is pre-settled when all its messages are.
// - The owner answers a batch once, when it has stored every message in it:
//   accepted when it accepted them all; else rejected with the condition
//   "wharf:batch-failures", whose info map holds "failures": a list of
//   [uint index, symbol condition, string description], one for each message
//   it refused (every other message of the batch was accepted).
// - Credit counts messages, and travels apart from Proton's: the relay's
//   attach also names the link ("wharf:relay-link" = its number) and offers
//   "wharf:relay-credit" = "records", after opening one receiver link per
//   peer connection from the owner's node address "$wharf.relay-credit".
//   An owner that takes batches answers with both properties and sends the
//   link's credit on that link as control records (the consumer
//   direction's format, below: kind credit, the relay's link number, the
//   limit in messages over the link's life), pre-settled, several to a
//   delivery. Proton's credit on the batch link counts deliveries only: the
//   owner keeps it at least the messages the relay may still send, so it
//   never exceeds the owner's window. (Counting messages in Proton's credit
//   instead, as before, made the owner advertise its window plus every
//   message beyond one a delivery the link ever carried: Proton's int
//   credit overflowed after about 2^31 messages and the producer stalled.)
//   An owner that answers the batch property without "wharf:relay-credit"
//   (from before records) gets one message a delivery, so that its Proton
//   credit still counts messages exactly. So the client sees the owner's
//   credit, as without batches.
//
// The other way, a relayed consumer's messages (owner -> relay):
// - Agreed per link the same way: the twin (a receiver) offers
//   "wharf:relay-batch" and names itself with "wharf:relay-link" = the
//   relay's number for the link; the owner answers with the property.
// - The owner sends several messages to a delivery, pre-settled; each
//   record is [u8 flags: 1 = pre-settled for the client, 2 = drained][u64
//   the engine's sequence number, big endian][u32 length][the bytes]. A
//   "drained" record (no bytes) says the drain the client asked for is done.
// - The relay answers each message as its client settles it, and passes the
//   client's credit and drain, as control records on one sender link per
//   peer connection to the owner's node address "$wharf.relay-acks": [u8
//   kind: 1 = credit, 2 = outcome][u64 the relay's link number][u64 credit
//   limit (in messages, over the link's life) | sequence number][u8 drain |
//   outcome]. Proton's credit on the batch link only paces deliveries (the
//   relay keeps it topped up); drain never travels as Proton's drain, which
//   would move its delivery count by credits that stand for messages.
// - Pre-settled (at-most-once) messages: the twin's attach also offers
//   "wharf:relay-presettled" = "acks detach" ("acks" from a relay of
//   before detach answers, below), and an owner that takes the answers
//   below echoes "acks" in its attach. The owner then keeps each such
//   message acquired until the relay answers it with an outcome record:
//   accepted once it passed the message to its client within the client's
//   credit, or unsent (engine::outcome_kind::unsent) for one it still held
//   when the client's link ended, which goes back to the queue as if never
//   dispatched. Without the offer (an older relay) the owner lets the
//   message go as it puts it in a batch; without the echo (an older owner)
//   the relay passes every message on as it comes and answers none.
//   A relay that offers "acks detach" also answers when the owner ends the
//   link (a queue move): it answers what it held as unsent, then detaches,
//   and the owner returns what is still unanswered to the queue only at
//   that detach. With plain "acks" the owner counts what is unanswered at
//   its own detach as sent (at-most-once: never twice). A relay that ends
//   its twins without its client side's answers (its link for them ended)
//   detaches them with answers_lost_condition: what is unanswered may have
//   been sent, and counts as sent.
// - A modified outcome's message-annotations: the twin's attach also offers
//   "wharf:relay-outcomes" = "annotations", and an owner that takes them
//   echoes it. The relay then sends such an outcome as an annotated record
//   (kind 3: an outcome record, then [u32 length][the encoded map]), and the
//   owner combines the map with the message's own. Without the echo (an
//   older owner) the outcome goes without them.
// - Answers of a batch that waits: a relayed producer's attach also offers
//   "wharf:relay-answers" = "prefix", and an owner that takes it echoes it.
//   While the producer's queue has no room (its "block" policy holds the
//   rest of a batch), the owner tells the relay, in a control record of
//   kind 4 (value: the batch's number, its delivery tag; arg: how many of
//   its first messages are accepted), which of the batch's messages are
//   stored already, and the relay accepts them to its client at once; the
//   batch's disposition later answers the rest. Without the offer or the
//   echo a batch is answered only as a whole.
// - A message larger than the client's max-message-size the relay never
//   sends (if the owner echoed the property): it answers it with outcome
//   too_large (engine::outcome_kind), and the owner keeps it for the
//   queue's other consumers.
// - The relay sends a twin's detach only once the owner has settled every
//   control delivery sent before it, so a message the client accepted is
//   never handed back to the queue by the detach.

#include "broker/engine/protocol.hpp"

#include <proton/condition.h>
#include <proton/link.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::server::relay {

inline constexpr std::string_view batch_property = "wharf:relay-batch";
inline constexpr std::string_view batch_failures = "wharf:batch-failures";
inline constexpr uint32_t max_batch = 64;
// A batch stops growing once it holds this many bytes (a single larger
// message still goes, alone).
inline constexpr size_t max_batch_bytes = 256 * 1024;

void append_record(std::string& out, bool settled, std::string_view bytes);

struct record {
    bool settled = false;
    std::string_view bytes;
};
// The records of a batch (views into `in`); false if `in` is not a batch.
bool parse_batch(std::string_view in, std::vector<record>& out);

// The N the peer's attach offered or answered (0: none, or not a number).
uint32_t batch_size(pn_link_t* l);
// Puts the property into this side's attach (before pn_link_open); a twin
// names itself too (`link`, nonzero), a producer's offers (or its owner
// answers) credit as control records, and a consumer's says that it
// settles pre-settled messages.
void offer_batch(pn_link_t* l, uint32_t n, uint64_t link = 0, bool credit_records = false,
                 std::string_view presettled = {}, bool annotated_outcomes = false, bool prefix_answers = false);
// The relay's number for a twin (0: none).
uint64_t relay_link(pn_link_t* l);
// Whether the peer's attach offered or answered credit as control records.
bool credit_records(pn_link_t* l);
// Whether the peer's relay settles a consumer's pre-settled messages.
bool presettled_acks(pn_link_t* l);
// Whether it also answers before it detaches when the owner ended the link.
bool presettled_detach_answers(pn_link_t* l);
// Whether the peer takes (or, the owner, answered that it takes) annotated
// outcome records.
bool annotated_outcomes(pn_link_t* l);
// Whether the peer offered (or, the owner, answered that it sends) the
// accepted prefix of a batch that waits.
bool prefix_answers(pn_link_t* l);

// ---- a relayed producer's credit ----
inline constexpr std::string_view credit_property = "wharf:relay-credit";
inline constexpr std::string_view credit_records_value = "records";
inline constexpr std::string_view credit_address = "$wharf.relay-credit";

// ---- the consumer direction ----
inline constexpr std::string_view relay_link_property = "wharf:relay-link";
inline constexpr std::string_view acks_address = "$wharf.relay-acks";
inline constexpr std::string_view presettled_property = "wharf:relay-presettled";
inline constexpr std::string_view presettled_acks_value = "acks";          // the owner's echo
inline constexpr std::string_view presettled_detach_value = "acks detach"; // the relay's offer
inline constexpr const char* answers_lost_condition = "wharf:relay-answers-lost";
inline constexpr std::string_view outcomes_property = "wharf:relay-outcomes";
inline constexpr std::string_view outcomes_annotated_value = "annotations";
inline constexpr std::string_view answers_property = "wharf:relay-answers";
inline constexpr std::string_view answers_prefix_value = "prefix";
// Deliveries of a batch link a relay lets the owner have at a time (each
// holds up to max_batch messages; the messages themselves are paced by the
// credit the relay passes as control records).
inline constexpr int batch_link_deliveries = 512;

inline constexpr size_t delivery_header = 13;
enum delivery_flags : uint8_t { presettled = 1, drained = 2 };
// The header of one record; the message's bytes follow it.
void put_delivery_header(char (&out)[delivery_header], uint8_t flags, uint64_t seq, size_t length);
struct delivery_record {
    uint8_t flags = 0;
    uint64_t seq = 0;
    std::string_view bytes;
};
bool parse_deliveries(std::string_view in, std::vector<delivery_record>& out);

inline constexpr size_t control_size = 18; // (an annotated outcome's map follows it)
struct control {
    enum kind : uint8_t { credit = 1, outcome = 2, annotated = 3, accepted = 4 } what = credit;
    uint64_t link = 0;
    uint64_t value = 0; // credit: the limit; outcome: the sequence number; accepted: the batch's number
    uint8_t arg = 0;    // credit: drain; outcome: engine::outcome_kind; accepted: how many of its first
    std::string_view annotations; // annotated: the encoded map (parsed: a view into the input)
};
void append_control(std::string& out, const control& c);

// What a consumer's disposition means for the queue: its outcome, or none
// yet (a settlement without a terminal outcome counts as accepted, as other
// brokers do; modified without delivery-failed nor undeliverable-here is
// released).
std::optional<engine::outcome_kind> outcome_for(uint64_t state, bool failed, bool undeliverable, bool settled);
bool parse_controls(std::string_view in, std::vector<control>& out);

struct failure {
    uint32_t index = 0;
    std::string name, description;
};
void put_failures(pn_condition_t* c, const std::vector<failure>& failures);
// The failures a "wharf:batch-failures" condition lists (none if it is another).
std::vector<failure> get_failures(pn_condition_t* c);

} // namespace wharf::server::relay
