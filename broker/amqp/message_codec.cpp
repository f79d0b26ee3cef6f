// Hand-written scanner for encoded AMQP 1.0 messages (AMQP 1.0 §1 types,
// §3.2 message format). Every read is bounds-checked against the end of the
// enclosing value; nothing is allocated except the strings the caller asks
// for and, on failure, the error description.

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/value_cursor.hpp"

#include <cassert>

namespace wharf::amqp {
namespace {

// Section codes, in the order the spec requires them.
enum class section : uint8_t {
    header = 0x70,
    delivery_annotations = 0x71,
    message_annotations = 0x72,
    properties = 0x73,
    application_properties = 0x74,
    data = 0x75,
    amqp_sequence = 0x76,
    amqp_value = 0x77,
    footer = 0x78,
};

// Rank for the order check; the three body kinds share one rank.
int section_rank(section s) {
    switch (s) {
    case section::header: return 0;
    case section::delivery_annotations: return 1;
    case section::message_annotations: return 2;
    case section::properties: return 3;
    case section::application_properties: return 4;
    case section::data:
    case section::amqp_sequence:
    case section::amqp_value: return 5;
    case section::footer: return 6;
    }
    return -1;
}

const char* section_name(section s) {
    switch (s) {
    case section::header: return "header";
    case section::delivery_annotations: return "delivery-annotations";
    case section::message_annotations: return "message-annotations";
    case section::properties: return "properties";
    case section::application_properties: return "application-properties";
    case section::data: return "data";
    case section::amqp_sequence: return "amqp-sequence";
    case section::amqp_value: return "amqp-value";
    case section::footer: return "footer";
    }
    return "?";
}

struct symbol_descriptor {
    std::string_view name;
    section code;
};
constexpr symbol_descriptor symbol_descriptors[] = {
    {"amqp:header:list", section::header},
    {"amqp:delivery-annotations:map", section::delivery_annotations},
    {"amqp:message-annotations:map", section::message_annotations},
    {"amqp:properties:list", section::properties},
    {"amqp:application-properties:map", section::application_properties},
    {"amqp:data:binary", section::data},
    {"amqp:amqp-sequence:list", section::amqp_sequence},
    {"amqp:value:*", section::amqp_value},
    {"amqp:footer:map", section::footer},
};

bool is_list(uint8_t code) { return code == 0x45 || code == 0xc0 || code == 0xd0; }
bool is_map(uint8_t code) { return code == 0xc1 || code == 0xd1; }
bool is_binary(uint8_t code) { return code == 0xa0 || code == 0xb0; }

// The message-level reads on top of the value cursor: section descriptors,
// and the header and properties fields the broker acts on.
class section_reader : public value_cursor {
  public:
    using value_cursor::value_cursor;

    // Reads the section descriptor after the 0x00 at `at`.
    bool read_descriptor(size_t at, section& out) {
        if (!need(1, size(), "a section descriptor")) {
            return false;
        }
        const size_t desc_at = pos();
        const uint8_t code = u8();
        uint64_t number = 0;
        switch (code) {
        case 0x53:
            if (!need(1, size(), "a section descriptor")) {
                return false;
            }
            number = u8();
            break;
        case 0x80:
            if (!need(8, size(), "a section descriptor")) {
                return false;
            }
            number = u64();
            break;
        case 0xa3:
        case 0xb3: {
            uint32_t n = 0;
            if (!read_width(code == 0xa3 ? 1 : 4, size(), "a section descriptor", n) ||
                !need(n, size(), "a section descriptor")) {
                return false;
            }
            const std::string_view name = take(n);
            for (const auto& d : symbol_descriptors) {
                if (d.name == name) {
                    out = d.code;
                    return true;
                }
            }
            return fail(codec_errc::bad_section, desc_at,
                        "unknown section descriptor symbol \"" + std::string(name.substr(0, 64)) + "\"");
        }
        default:
            return fail(codec_errc::bad_section, desc_at,
                        "section descriptor is " + describe_code(code) + ", not a ulong or symbol");
        }
        if (number < 0x70 || number > 0x78) {
            return fail(codec_errc::bad_section, at, "unknown section descriptor code " + std::to_string(number));
        }
        out = static_cast<section>(number);
        return true;
    }

    // Opens the list at the cursor (list0/list8/list32, or null as an empty
    // list). Leaves the cursor on the first element.
    bool open_list(const char* what, size_t& end, uint32_t& count) {
        if (!need(1, size(), what)) {
            return false;
        }
        const size_t at = pos();
        const uint8_t code = u8();
        if (code == 0x40 || code == 0x45) {
            end = pos();
            count = 0;
            return true;
        }
        if (code != 0xc0 && code != 0xd0) {
            return fail(codec_errc::bad_section, at,
                        std::string(what) + " section holds " + describe_code(code) + ", not a list");
        }
        return open_compound(code, at, size(), end, count);
    }

    bool field_type_error(const char* section_name, const char* field, size_t at, uint8_t code, const char* want) {
        return fail(codec_errc::bad_field_type, at,
                    std::string(section_name) + "." + field + " is " + describe_code(code) + ", expected " + want);
    }

    bool read_bool(const char* field, size_t limit, bool& out) {
        const size_t at = pos();
        const uint8_t code = u8();
        switch (code) {
        case 0x40: return true;
        case 0x41: out = true; return true;
        case 0x42: out = false; return true;
        case 0x56: {
            if (!need(1, limit, "a boolean")) {
                return false;
            }
            const uint8_t b = u8();
            if (b > 1) {
                return fail(codec_errc::bad_field_type, at,
                            std::string("header.") + field + " is boolean 0x56 with invalid byte " + hex_byte(b));
            }
            out = b == 1;
            return true;
        }
        default:
            return field_type_error("header", field, at, code, "boolean");
        }
    }

    bool read_uint(const char* field, size_t limit, std::optional<uint32_t>& out) {
        const size_t at = pos();
        const uint8_t code = u8();
        switch (code) {
        case 0x40: out.reset(); return true;
        case 0x43: out = 0; return true;
        case 0x52:
            if (!need(1, limit, "a smalluint")) {
                return false;
            }
            out = u8();
            return true;
        case 0x70:
            if (!need(4, limit, "a uint")) {
                return false;
            }
            out = u32();
            return true;
        default:
            return field_type_error("header", field, at, code, "uint");
        }
    }

    bool read_header(header_fields& h) {
        size_t end = 0;
        uint32_t count = 0;
        if (!open_list("header", end, count)) {
            return false;
        }
        for (uint32_t i = 0; i < count; ++i) {
            if (!need(1, end, "a header field")) {
                return false;
            }
            const size_t at = pos();
            bool ok = true;
            switch (i) {
            case 0: ok = read_bool("durable", end, h.durable); break;
            case 1: {
                const uint8_t code = u8();
                if (code == 0x50) {
                    ok = need(1, end, "a ubyte");
                    if (ok) {
                        h.priority = u8();
                    }
                } else if (code != 0x40) {
                    ok = field_type_error("header", "priority", at, code, "ubyte");
                }
                break;
            }
            case 2: ok = read_uint("ttl", end, h.ttl_ms); break;
            case 3: ok = read_bool("first-acquirer", end, h.first_acquirer); break;
            case 4: {
                std::optional<uint32_t> n;
                ok = read_uint("delivery-count", end, n);
                h.delivery_count = n.value_or(0);
                break;
            }
            default:
                ok = skip_value(end, 1);
                if (ok) {
                    h.extra.append(since(at));
                    ++h.extra_count;
                }
                break;
            }
            if (!ok) {
                return false;
            }
        }
        return pos() == end || list_size_mismatch("header list", end);
    }

    bool list_size_mismatch(const char* what, size_t end) {
        return fail(codec_errc::bad_constructor, pos(),
                    std::string(what) + " declares size ending at offset " + std::to_string(end) +
                        " but its elements end at offset " + std::to_string(pos()));
    }

    bool read_address(const char* field, size_t end, std::optional<std::string>& out) {
        const size_t at = pos();
        const uint8_t code = u8();
        if (code == 0x40) {
            out.reset();
            return true;
        }
        if (code != 0xa1 && code != 0xa3 && code != 0xb1 && code != 0xb3) {
            return field_type_error("properties", field, at, code, "string or symbol");
        }
        uint32_t n = 0;
        if (!read_width(code < 0xb0 ? 1 : 4, end, type_name(code), n) || !need(n, end, type_name(code))) {
            return false;
        }
        out.emplace(take(n));
        return true;
    }

    bool read_properties(message_info& info) {
        size_t end = 0;
        uint32_t count = 0;
        if (!open_list("properties", end, count)) {
            return false;
        }
        for (uint32_t i = 0; i < count; ++i) {
            if (!need(1, end, "a properties field")) {
                return false;
            }
            const size_t at = pos();
            bool ok = true;
            switch (i) {
            case 0: info.message_id_code = peek(); ok = skip_value(end, 1); break;
            case 5: info.correlation_id_code = peek(); ok = skip_value(end, 1); break;
            case 2: ok = read_address("to", end, info.to); break;
            case 4: ok = read_address("reply-to", end, info.reply_to); break;
            case 8: {
                const uint8_t code = u8();
                if (code == 0x83) {
                    ok = need(8, end, "a timestamp");
                    if (ok) {
                        info.absolute_expiry_ms = static_cast<int64_t>(u64());
                    }
                } else if (code == 0x40) {
                    info.absolute_expiry_ms.reset();
                } else {
                    ok = field_type_error("properties", "absolute-expiry-time", at, code, "timestamp");
                }
                break;
            }
            default: ok = skip_value(end, 1); break;
            }
            if (!ok) {
                return false;
            }
        }
        return pos() == end || list_size_mismatch("properties list", end);
    }

    // Skips a section value that must be of the given shape.
    bool skip_section_value(section s) {
        if (!need(1, size(), "a section value")) {
            return false;
        }
        const size_t at = pos();
        const uint8_t code = peek();
        bool shape_ok = true;
        switch (s) {
        case section::delivery_annotations:
        case section::message_annotations:
        case section::application_properties:
        case section::footer: shape_ok = is_map(code) || code == 0x40; break;
        case section::data: shape_ok = is_binary(code); break;
        case section::amqp_sequence: shape_ok = is_list(code); break;
        default: break;
        }
        if (!shape_ok) {
            return fail(codec_errc::bad_section, at,
                        std::string(section_name(s)) + " section holds " + describe_code(code));
        }
        return skip_value(size(), 1);
    }
};


void put_be32(uint32_t v, std::string& out) {
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((v >> shift) & 0xff));
    }
}

void put_uint(uint32_t v, std::string& out) {
    if (v == 0) {
        out.push_back('\x43');
    } else if (v < 256) {
        out.push_back('\x52');
        out.push_back(static_cast<char>(v));
    } else {
        out.push_back('\x70');
        put_be32(v, out);
    }
}

void encode_header_fields(const header_fields& h, int fields, std::string& out);

} // namespace

bool is_message_id_code(uint8_t code) {
    switch (code) {
    case 0x40:                         // null
    case 0x44: case 0x53: case 0x80:   // ulong
    case 0x98:                         // uuid
    case 0xa0: case 0xb0:              // binary
    case 0xa1: case 0xb1: return true; // string
    default: return false;
    }
}

result<message_info, codec_error> scan_message(std::string_view bytes) {
    if (bytes.empty()) {
        return fail(codec_error{codec_errc::truncated,
                                "empty message: zero bytes, but a message needs at least one section (at byte offset 0)"});
    }
    section_reader s(bytes);
    message_info info;
    int last_rank = -1;
    std::optional<section> body_kind;
    while (!s.at_end()) {
        const size_t at = s.pos();
        const uint8_t first = s.u8();
        if (first != 0x00) {
            s.fail(codec_errc::bad_section, at,
                   "top-level value is " + describe_code(first) + ", not a described message section");
            return fail(s.take_error());
        }
        section sec{};
        if (!s.read_descriptor(at, sec)) {
            return fail(s.take_error());
        }
        const int rank = section_rank(sec);
        const bool repeatable_body =
            body_kind && *body_kind == sec && (sec == section::data || sec == section::amqp_sequence);
        if (rank < last_rank || (rank == last_rank && !repeatable_body)) {
            std::string why = std::string(section_name(sec)) + " section ";
            if (rank == 5 && body_kind && *body_kind != sec) {
                why += std::string("follows a ") + section_name(*body_kind) + " body section";
            } else if (rank == last_rank) {
                why += "appears twice";
            } else {
                why += "comes after a later section";
            }
            s.fail(codec_errc::section_order, at, why);
            return fail(s.take_error());
        }
        if (rank > 2 && last_rank <= 1) info.annotations_at = info.annotations_end = at; // none: it would go here
        last_rank = rank;
        bool ok = true;
        switch (sec) {
        case section::header:
            ok = s.read_header(info.header);
            info.has_header = true;
            info.header_end = s.pos();
            break;
        case section::properties:
            info.properties_at = at;
            ok = s.read_properties(info);
            info.properties_end = s.pos();
            break;
        case section::application_properties:
            info.application_properties_at = at;
            ok = s.skip_section_value(sec);
            info.application_properties_end = s.pos();
            break;
        case section::data:
        case section::amqp_sequence:
        case section::amqp_value:
            body_kind = sec;
            info.has_body = true;
            ok = s.skip_section_value(sec);
            break;
        case section::message_annotations:
            info.annotations_at = at;
            ok = s.skip_section_value(sec);
            info.annotations_end = s.pos();
            break;
        default: ok = s.skip_section_value(sec); break;
        }
        if (!ok) {
            return fail(s.take_error());
        }
    }
    if (last_rank <= 1) info.annotations_at = info.annotations_end = bytes.size();
    if (!info.has_header) {
        info.header = header_fields{};
        info.header_end = 0;
    }
    return info;
}

std::optional<section_spans> locate_sections(std::string_view bytes) {
    section_reader s(bytes);
    section_spans out;
    while (!s.at_end()) {
        const size_t at = s.pos();
        section sec{};
        if (s.u8() != 0x00 || !s.read_descriptor(at, sec)) {
            return std::nullopt;
        }
        if (section_rank(sec) >= section_rank(section::data)) {
            break; // the body and the footer: nothing a selector reads
        }
        if (!s.jump_value(s.size(), 1)) {
            return std::nullopt;
        }
        switch (sec) {
        case section::header: out.header_at = at, out.header_end = s.pos(); break;
        case section::properties: out.properties_at = at, out.properties_end = s.pos(); break;
        case section::application_properties:
            out.application_properties_at = at, out.application_properties_end = s.pos();
            break;
        default: break;
        }
    }
    return out;
}

void encode_header(const header_fields& h, std::string& out) {
    const header_fields d;
    int fields = 0; // how many leading fields to write
    if (h.extra_count != 0) {
        fields = 5;
    } else if (h.delivery_count != d.delivery_count) {
        fields = 5;
    } else if (h.first_acquirer != d.first_acquirer) {
        fields = 4;
    } else if (h.ttl_ms) {
        fields = 3;
    } else if (h.priority != d.priority) {
        fields = 2;
    } else if (h.durable != d.durable) {
        fields = 1;
    }
    out.append("\x00\x53\x70", 3);
    if (fields == 0) {
        out.push_back('\x45');
        return;
    }
    if (h.extra_count != 0) { // a list32 if they need one; else as below
        std::string body;
        encode_header_fields(h, 5, body);
        body += h.extra;
        const uint64_t count = 5 + uint64_t{h.extra_count};
        if (body.size() + 1 <= 255 && count <= 255) {
            out.push_back('\xc0');
            out.push_back(static_cast<char>(body.size() + 1));
            out.push_back(static_cast<char>(count));
        } else {
            out.push_back('\xd0');
            put_be32(static_cast<uint32_t>(body.size() + 4), out);
            put_be32(static_cast<uint32_t>(count), out);
        }
        out += body;
        return;
    }
    out.push_back('\xc0');
    const size_t size_at = out.size();
    out.push_back('\0');
    out.push_back(static_cast<char>(fields));
    encode_header_fields(h, fields, out);
    out[size_at] = static_cast<char>(out.size() - size_at - 1); // at most 18
}

namespace {
// The first `fields` (1 to 5) of the header's fields.
void encode_header_fields(const header_fields& h, int fields, std::string& out) {
    out.push_back(h.durable ? '\x41' : '\x42');
    if (fields > 1) {
        out.push_back('\x50');
        out.push_back(static_cast<char>(h.priority));
    }
    if (fields > 2) {
        if (h.ttl_ms) {
            put_uint(*h.ttl_ms, out);
        } else {
            out.push_back('\x40');
        }
    }
    if (fields > 3) {
        out.push_back(h.first_acquirer ? '\x41' : '\x42');
    }
    if (fields > 4) {
        put_uint(h.delivery_count, out);
    }
}
} // namespace

std::string with_header(std::string_view bytes, const message_info& info, const header_fields& h) {
    assert(info.header_end <= bytes.size());
    assert(info.has_header || info.header_end == 0);
    std::string out;
    out.reserve(24 + bytes.size() - info.header_end);
    encode_header(h, out);
    out.append(bytes.substr(info.header_end));
    return out;
}

} // namespace wharf::amqp
