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
// - Credit still counts messages: a batch of n spends n credits, though
//   Proton counts one delivery. Both ends know it: the owner takes the
//   n - 1 Proton did not count off the credit it sees, and the relay sends
//   no more messages than (deliveries so far + credit), the owner's
//   absolute limit. So the client sees the owner's credit, as without
//   batches.

#include <proton/condition.h>
#include <proton/link.h>

#include <cstdint>
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
// Puts the property into this side's attach (before pn_link_open).
void offer_batch(pn_link_t* l, uint32_t n);

struct failure {
    uint32_t index = 0;
    std::string name, description;
};
void put_failures(pn_condition_t* c, const std::vector<failure>& failures);
// The failures a "wharf:batch-failures" condition lists (none if it is another).
std::vector<failure> get_failures(pn_condition_t* c);

} // namespace wharf::server::relay
