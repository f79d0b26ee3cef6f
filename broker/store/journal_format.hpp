#pragma once
// The journal's on-disk format. A data directory holds `wharf.meta` (format
// version and node id) and numbered segment files `journal-NNNNNNNN.log`
// (numbers 1 to 4294967295, at least 8 digits),
// each starting with an 8-byte magic and then records:
//
//   u32 length (of type + payload) | u32 crc32 (of type + payload) | u8 type | payload
//
// Payloads (integers little-endian, as on the hosts we build for):
//   enqueue: u16 queue-len, queue, u64 seq, u32 delivery-count, u8 flags,
//            i64 expiry-ms, message bytes (the rest)
//   update:  u16 queue-len, queue, u64 seq, u32 delivery-count, u8 flags
//   remove:  u16 queue-len, queue, u64 seq
//   noop:    nothing (a probe written to learn whether the disk works again)
//
// Pure functions; any thread.

#include "broker/common/limits.hpp"
#include "broker/engine/message_body.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::store {

inline constexpr std::string_view segment_magic{"WHARFJ01", 8};
inline constexpr uint32_t format_version = 1;
inline constexpr size_t record_header_size = 8;

// Limits of what a record can hold: the queue name's length is 16 bits, and
// a whole record (header included) is at most 4 GiB - 1 bytes, because its
// length field is 32 bits and so is the store's count of a record's bytes.
inline constexpr size_t max_queue_name_size = UINT16_MAX;
inline constexpr uint64_t max_record_size = UINT32_MAX;
// What an enqueue record adds to the queue name and the body: the header,
// type, name length, seq, delivery count, flags, expiry.
inline constexpr size_t enqueue_record_overhead = record_header_size + 1 + 2 + 8 + 4 + 1 + 8;

// Whether append_enqueue can write this record (it throws otherwise).
constexpr bool enqueue_record_fits(size_t queue_size, size_t body_size) {
    return queue_size <= max_queue_name_size &&
           body_size <= max_record_size - enqueue_record_overhead - queue_size;
}
// What the node lets in always fits: the longest name with the largest body.
static_assert(max_queue_name_size == wharf::max_queue_name);
static_assert(enqueue_record_fits(wharf::max_queue_name, engine::message_ref::max_size));

enum class record_type : uint8_t { enqueue = 1, update = 2, remove = 3, noop = 4 };

// flags
inline constexpr uint8_t flag_redelivered = 1;
inline constexpr uint8_t flag_durable = 2;

struct record {
    record_type type{};
    std::string_view queue;
    uint64_t seq = 0;
    uint32_t delivery_count = 0;
    uint8_t flags = 0;
    int64_t expiry_ms = 0;
    std::string_view body; // enqueue only; points into the read buffer
};

// The append_* functions write a record's length but leave its checksum
// zero; seal_records fills in the checksums of a buffer of whole records.
// A record that cannot be represented (a queue name over
// max_queue_name_size, a record over max_record_size) is never written cut
// short: they throw std::length_error before appending anything, so `out`
// is unchanged. Callers check first (enqueue_record_fits); the throw is the
// last line of defence, not a way to report.
// The queue engine's strand appends and the journal's writer thread seals
// just before the write, so CRC-32 (5 % of a node taking durable messages)
// is off the thread that serves connections.
void append_enqueue(std::string& out, std::string_view queue, uint64_t seq, uint32_t delivery_count,
                    uint8_t flags, int64_t expiry_ms, std::string_view body);
void append_update(std::string& out, std::string_view queue, uint64_t seq, uint32_t delivery_count,
                   uint8_t flags);
void append_remove(std::string& out, std::string_view queue, uint64_t seq);
void append_noop(std::string& out);
// `bytes` holds whole records as append_* left them.
void seal_records(std::string& bytes);

enum class read_status {
    ok,
    end,      // no more bytes
    torn,     // the bytes end inside a record (a write cut short)
    corrupt,  // a complete record whose checksum or contents are wrong
};

// Reads the record at `pos` and advances `pos` past it on ok.
read_status read_record(std::string_view data, size_t& pos, record& out);

// For recovery, to tell a write cut short from damage: the first offset at
// or after `from` where a whole valid record starts (length within `data`,
// checksum and contents good), or data.size() when there is none.
size_t find_valid_record(std::string_view data, size_t from);
// Whether [from, to) holds a whole 4 KiB page of the file (aligned) that is
// all zeros: what a page of a write that never reached the disk reads as.
bool holds_a_zero_page(std::string_view data, size_t from, size_t to);
// How many valid records there are at or after `from`: each run of records
// found by find_valid_record, read to where it stops.
size_t count_valid_records(std::string_view data, size_t from);

// "journal-NNNNNNNN.log": at least 8 digits, more above 99,999,999.
std::string segment_name(uint32_t number);
// The number in a segment file name (1 to UINT32_MAX, written as
// segment_name writes it), or 0 when `name` is not one.
uint32_t segment_number(std::string_view name);
// Whether `name` is "journal-*.log": a segment, or a name that should be one.
bool looks_like_segment(std::string_view name);

} // namespace wharf::store
