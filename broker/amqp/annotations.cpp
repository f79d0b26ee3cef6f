#include "broker/amqp/annotations.hpp"

#include "broker/amqp/value_cursor.hpp"

#include <unordered_map>
#include <utility>
#include <vector>

namespace wharf::amqp {
namespace {

struct entry {
    std::string_view key;   // encoded, constructor included
    std::string_view value; // encoded
};

bool is_symbol_or_ulong(uint8_t code) {
    return code == 0xa3 || code == 0xb3 || code == 0x80 || code == 0x53 || code == 0x44;
}

// The entries of the encoded map (or null) `bytes`, which must be all of
// it; false with the cursor's error otherwise.
bool read_map(value_cursor& c, std::vector<entry>& out) {
    if (!c.need(1, c.size(), "an annotations map")) return false;
    const size_t at = c.pos();
    const uint8_t code = c.u8();
    if (code == 0x40) {
        return c.at_end() || c.fail(codec_errc::bad_field_type, c.pos(), "bytes after the annotations' null");
    }
    if (code != 0xc1 && code != 0xd1)
        return c.fail(codec_errc::bad_field_type, at, "annotations are " + describe_code(code) + ", not a map");
    size_t end = 0;
    uint32_t count = 0;
    if (!c.open_compound(code, at, c.size(), end, count)) return false;
    if (count % 2 != 0)
        return c.fail(codec_errc::bad_field_type, at, "the annotations map has an odd count (" + std::to_string(count) + ")");
    for (uint32_t i = 0; i < count; i += 2) {
        const size_t key_at = c.pos();
        if (!c.skip_value(end, 1)) return false;
        const std::string_view key = c.since(key_at);
        const size_t value_at = c.pos();
        if (!c.skip_value(end, 1)) return false;
        out.push_back({key, c.since(value_at)});
    }
    if (!c.close_compound(code, at, end)) return false;
    return c.at_end() || c.fail(codec_errc::bad_field_type, c.pos(), "bytes after the annotations map");
}

// A key as a value, whichever way it was encoded: sym8 and sym32 of the
// same name are one key, as are the three encodings of a ulong.
std::string key_of(std::string_view k) {
    const auto code = static_cast<uint8_t>(k[0]);
    std::string out(1, code == 0xa3 || code == 0xb3 ? 's' : code == 0x44 || code == 0x53 || code == 0x80 ? 'u' : 'x');
    switch (code) {
    case 0xa3: out.append(k.substr(2)); break;
    case 0xb3: out.append(k.substr(5)); break;
    case 0x44: out.append(8, '\0'); break;
    case 0x53: out.append(7, '\0').append(k.substr(1, 1)); break;
    case 0x80: out.append(k.substr(1, 8)); break;
    default: out.append(k); break; // only in a message's own annotations
    }
    return out;
}

void put_be32(size_t v, std::string& out) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

} // namespace

std::optional<codec_error> check_annotations(std::string_view map) {
    value_cursor c(map);
    std::vector<entry> entries;
    if (!read_map(c, entries)) return c.take_error();
    for (const auto& e : entries) {
        const auto code = static_cast<uint8_t>(e.key[0]);
        if (!is_symbol_or_ulong(code))
            return codec_error{codec_errc::bad_field_type,
                               "an annotation key is " + describe_code(code) +
                                   "; annotation keys are symbols or ulongs (AMQP 1.0 §3.2.10)"};
    }
    return std::nullopt;
}

size_t annotation_count(std::string_view map) {
    value_cursor c(map);
    std::vector<entry> entries;
    read_map(c, entries);
    return entries.size();
}

std::string with_annotations(std::string_view message, const message_info& info, std::string_view map) {
    std::vector<entry> merged;
    if (info.annotations_end > info.annotations_at) {
        // The section: 0x00, a descriptor (scan_message checked it), then the map.
        value_cursor c(message.substr(0, info.annotations_end));
        c.take(info.annotations_at + 1);
        c.skip_value(info.annotations_end, 1);
        value_cursor m(message.substr(c.pos(), info.annotations_end - c.pos()));
        read_map(m, merged);
    }
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < merged.size(); ++i) index.emplace(key_of(merged[i].key), i);
    std::vector<entry> changes;
    value_cursor c(map);
    read_map(c, changes);
    for (const auto& e : changes) {
        auto [it, added] = index.emplace(key_of(e.key), merged.size());
        if (added)
            merged.push_back(e);
        else
            merged[it->second].value = e.value;
    }

    size_t body = 0;
    for (const auto& e : merged) body += e.key.size() + e.value.size();
    const size_t count = merged.size() * 2;
    std::string out;
    out.reserve(message.size() - (info.annotations_end - info.annotations_at) + body + 12);
    out.append(message.substr(0, info.annotations_at));
    out.append("\x00\x53\x72", 3);
    if (body + 1 <= 255 && count <= 255) {
        out.push_back('\xc1');
        out.push_back(static_cast<char>(body + 1));
        out.push_back(static_cast<char>(count));
    } else {
        out.push_back('\xd1');
        put_be32(body + 4, out);
        put_be32(count, out);
    }
    for (const auto& e : merged) {
        out.append(e.key);
        out.append(e.value);
    }
    out.append(message.substr(info.annotations_end));
    return out;
}

} // namespace wharf::amqp
