#pragma once
// Scans an encoded AMQP 1.0 message (the bare bytes of a transfer's payload:
// header, delivery-annotations, message-annotations, properties,
// application-properties, body sections, footer) without decoding it into a
// proton::message. The broker keeps the encoded bytes and passes them through
// byte-exact; only the fields it acts on are read here, and only the header
// section is ever re-encoded (for redelivery).
//
// Pure functions, no state: safe on any thread.

#include "broker/common/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wharf::amqp {

enum class codec_errc {
    truncated,          // the bytes end inside a value
    bad_constructor,    // an unknown or unsupported format code
    bad_section,        // a top-level value that is not a described message section
    section_order,      // sections out of the order the spec requires
    bad_field_type,     // a header/properties field of the wrong AMQP type
};

struct codec_error {
    codec_errc code;
    std::string description; // for a person: what was wrong and at which offset
};

// The fields of the header section (AMQP 1.0 §3.2.1) with their spec defaults.
struct header_fields {
    bool durable = false;
    uint8_t priority = 4;
    std::optional<uint32_t> ttl_ms;
    bool first_acquirer = false;
    uint32_t delivery_count = 0;
    // Fields after delivery-count (none in AMQP 1.0; a later version's),
    // encoded as they came, and how many: a rewrite keeps them.
    std::string extra;
    uint32_t extra_count = 0;
};

// What the broker needs to know about a message, plus where its header ends.
struct message_info {
    bool has_header = false;
    header_fields header;
    // Offset of the first byte after the header section; 0 when there is none.
    // bytes.substr(header_end) is everything but the header, unchanged.
    size_t header_end = 0;
    std::optional<std::string> to;                // properties.to (address)
    std::optional<std::string> reply_to;          // properties.reply-to
    std::optional<int64_t> absolute_expiry_ms;    // properties.absolute-expiry-time
    // The format codes of properties.message-id and correlation-id, 0x40
    // (null) when absent. The spec allows ulong, uuid, binary and string;
    // the scan takes any type (a queue passes a message on as it came), and
    // what needs an id of the allowed types checks with is_message_id_code.
    uint8_t message_id_code = 0x40;
    uint8_t correlation_id_code = 0x40;
    bool has_body = false;                        // at least one data/amqp-sequence/amqp-value
    // The message-annotations section's bytes: [annotations_at,
    // annotations_end). Without one, both are where it would go (after the
    // header and delivery-annotations).
    size_t annotations_at = 0;
    size_t annotations_end = 0;
    // The properties and application-properties sections' bytes (both 0
    // when absent), for what reads more of them (selectors).
    size_t properties_at = 0, properties_end = 0;
    size_t application_properties_at = 0, application_properties_end = 0;
};

// Whether `code` encodes a value of a type the spec allows for a message-id
// or correlation-id (ulong, uuid, binary, string), or null.
bool is_message_id_code(uint8_t code);

// Reads `bytes` as one complete message. Every section is skipped over
// structurally (so a malformed value anywhere is found), but only the header
// and properties are interpreted.
result<message_info, codec_error> scan_message(std::string_view bytes);

// Where a message's header, properties and application-properties sections
// are, each [at, end) from its 0x00 (both 0 when absent), for a message
// scan_message has accepted: each section is stepped over by its declared
// size, nothing inside is checked again, and the walk stops at the first
// body section. Selectors read messages this way, once per consumer that
// looks at them. nullopt when the bytes end inside a section it steps over.
struct section_spans {
    size_t header_at = 0, header_end = 0;
    size_t properties_at = 0, properties_end = 0;
    size_t application_properties_at = 0, application_properties_end = 0;
};
std::optional<section_spans> locate_sections(std::string_view bytes);

// Appends the encoded header section for `h` to `out`. Fields equal to their
// defaults at the end of the list are omitted, as the spec allows.
void encode_header(const header_fields& h, std::string& out);

// Returns `bytes` with its header replaced by one encoding `h` (inserting a
// header when there was none). `info` must come from scan_message(bytes).
std::string with_header(std::string_view bytes, const message_info& info, const header_fields& h);

} // namespace wharf::amqp
