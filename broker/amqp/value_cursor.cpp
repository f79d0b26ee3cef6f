// Structural skipping of AMQP 1.0 values; see value_cursor.hpp.

#include "broker/amqp/value_cursor.hpp"

namespace wharf::amqp {

int fixed_width(uint8_t code) {
    switch (code) {
    case 0x40: case 0x41: case 0x42: case 0x43: case 0x44: case 0x45:
        return 0;
    case 0x50: case 0x51: case 0x52: case 0x53: case 0x54: case 0x55: case 0x56:
        return 1;
    case 0x60: case 0x61:
        return 2;
    case 0x70: case 0x71: case 0x72: case 0x73: case 0x74:
        return 4;
    case 0x80: case 0x81: case 0x82: case 0x83: case 0x84:
        return 8;
    case 0x94: case 0x98:
        return 16;
    default:
        return -1;
    }
}

const char* type_name(uint8_t code) {
    switch (code) {
    case 0x00: return "described";
    case 0x40: return "null";
    case 0x41: return "true";
    case 0x42: return "false";
    case 0x43: return "uint0";
    case 0x44: return "ulong0";
    case 0x45: return "list0";
    case 0x50: return "ubyte";
    case 0x51: return "byte";
    case 0x52: return "smalluint";
    case 0x53: return "smallulong";
    case 0x54: return "smallint";
    case 0x55: return "smalllong";
    case 0x56: return "boolean";
    case 0x60: return "ushort";
    case 0x61: return "short";
    case 0x70: return "uint";
    case 0x71: return "int";
    case 0x72: return "float";
    case 0x73: return "char";
    case 0x74: return "decimal32";
    case 0x80: return "ulong";
    case 0x81: return "long";
    case 0x82: return "double";
    case 0x83: return "timestamp";
    case 0x84: return "decimal64";
    case 0x94: return "decimal128";
    case 0x98: return "uuid";
    case 0xa0: return "vbin8";
    case 0xa1: return "str8";
    case 0xa3: return "sym8";
    case 0xb0: return "vbin32";
    case 0xb1: return "str32";
    case 0xb3: return "sym32";
    case 0xc0: return "list8";
    case 0xc1: return "map8";
    case 0xd0: return "list32";
    case 0xd1: return "map32";
    case 0xe0: return "array8";
    case 0xf0: return "array32";
    default: return "unknown";
    }
}

const char* type_family(uint8_t code) {
    switch (code) {
    case 0x00: return "described";
    case 0x40: return "null";
    case 0x41: case 0x42: case 0x56: return "boolean";
    case 0x43: case 0x52: case 0x70: return "uint";
    case 0x44: case 0x53: case 0x80: return "ulong";
    case 0x45: case 0xc0: case 0xd0: return "list";
    case 0x50: return "ubyte";
    case 0x51: return "byte";
    case 0x54: case 0x71: return "int";
    case 0x55: case 0x81: return "long";
    case 0x60: return "ushort";
    case 0x61: return "short";
    case 0x72: return "float";
    case 0x73: return "char";
    case 0x74: return "decimal32";
    case 0x82: return "double";
    case 0x83: return "timestamp";
    case 0x84: return "decimal64";
    case 0x94: return "decimal128";
    case 0x98: return "uuid";
    case 0xa0: case 0xb0: return "binary";
    case 0xa1: case 0xb1: return "string";
    case 0xa3: case 0xb3: return "symbol";
    case 0xc1: case 0xd1: return "map";
    case 0xe0: case 0xf0: return "array";
    default: return "unknown";
    }
}

std::string hex_byte(uint8_t b) {
    constexpr char digits[] = "0123456789abcdef";
    return {'0', 'x', digits[b >> 4], digits[b & 0xf]};
}

std::string describe_code(uint8_t code) {
    return std::string(type_name(code)) + " (" + hex_byte(code) + ")";
}

bool is_sized(uint8_t code) {
    switch (code) {
    case 0xa0: case 0xa1: case 0xa3: case 0xb0: case 0xb1: case 0xb3:
    case 0xc0: case 0xc1: case 0xd0: case 0xd1: case 0xe0: case 0xf0:
        return true;
    default:
        return false;
    }
}

bool value_cursor::fail(codec_errc code, size_t offset, std::string what) {
    error_.code = code;
    error_.description = std::move(what) + " (at byte offset " + std::to_string(offset) + ")";
    return false;
}

bool value_cursor::truncated(size_t n, size_t limit, const char* what) {
    const bool outer = limit == size_;
    return fail(codec_errc::truncated, pos_,
                std::string(outer ? "message ends inside " : "enclosing value ends inside ") + what + ": needs " +
                    std::to_string(n) + " byte(s), " + std::to_string(limit - pos_) + " left");
}

// Reads a value's format code (0x00 for a described one), where it is, and
// checks the depth: the start of skip_value and jump_value.
bool value_cursor::read_constructor(size_t limit, int depth, size_t& at, uint8_t& code) {
    if (depth > max_value_depth) {
        return fail(codec_errc::bad_constructor, pos_,
                    "values nested more than " + std::to_string(max_value_depth) + " deep");
    }
    if (!need(1, limit, "a constructor")) {
        return false;
    }
    at = pos_;
    code = u8();
    return true;
}

bool value_cursor::skip_value(size_t limit, int depth) {
    size_t at = 0;
    uint8_t code = 0;
    if (!read_constructor(limit, depth, at, code)) return false;
    if (code == 0x00) return skip_value(limit, depth + 1) && skip_value(limit, depth + 1);
    return skip_body(code, at, limit, depth);
}

bool value_cursor::jump_value(size_t limit, int depth) {
    size_t at = 0;
    uint8_t code = 0;
    if (!read_constructor(limit, depth, at, code)) return false;
    if (code == 0x00) return jump_value(limit, depth + 1) && jump_value(limit, depth + 1);
    size_t n = 0;
    if (const int w = fixed_width(code); w >= 0) {
        n = static_cast<size_t>(w);
    } else if (is_sized(code)) {
        uint32_t size = 0;
        // The size field is one byte for the 0xa_, 0xc_ and 0xe_ codes, four for 0xb_, 0xd_, 0xf_.
        if (!read_width((code & 0x10) != 0 ? 4 : 1, limit, type_name(code), size)) {
            return false;
        }
        n = size;
    } else {
        return fail(codec_errc::bad_constructor, at, "unknown format code " + hex_byte(code));
    }
    if (!need(n, limit, type_name(code))) {
        return false;
    }
    pos_ += n;
    return true;
}

bool value_cursor::skip_body(uint8_t code, size_t at, size_t limit, int depth) {
    if (const int w = fixed_width(code); w >= 0) {
        if (!need(w, limit, type_name(code))) {
            return false;
        }
        pos_ += w;
        return true;
    }
    switch (code) {
    case 0xa0: case 0xa1: case 0xa3:
    case 0xb0: case 0xb1: case 0xb3: {
        uint32_t n = 0;
        if (!read_width(code < 0xb0 ? 1 : 4, limit, type_name(code), n) ||
            !need(n, limit, type_name(code))) {
            return false;
        }
        pos_ += n;
        return true;
    }
    case 0xc0: case 0xc1:
    case 0xd0: case 0xd1: {
        size_t end = 0;
        uint32_t count = 0;
        if (!open_compound(code, at, limit, end, count)) {
            return false;
        }
        if (code & 0x01) { // map
            if (count % 2 != 0) {
                return fail(codec_errc::bad_constructor, at,
                            describe_code(code) + " has an odd element count " + std::to_string(count));
            }
        }
        for (uint32_t i = 0; i < count; ++i) {
            if (!skip_value(end, depth + 1)) {
                return false;
            }
        }
        return close_compound(code, at, end);
    }
    case 0xe0: case 0xf0:
        return skip_array(code, at, limit, depth);
    default:
        return fail(codec_errc::bad_constructor, at, "unknown format code " + hex_byte(code));
    }
}

bool value_cursor::open_compound(uint8_t code, size_t at, size_t limit, size_t& end, uint32_t& count) {
    const int width = code == 0xc0 || code == 0xc1 || code == 0xe0 ? 1 : 4;
    uint32_t size = 0;
    if (!read_width(width, limit, type_name(code), size)) {
        return false;
    }
    if (size < static_cast<uint32_t>(width)) {
        return fail(codec_errc::bad_constructor, at,
                    describe_code(code) + " declares size " + std::to_string(size) +
                        ", too small for its count field");
    }
    if (!need(size, limit, type_name(code))) {
        return false;
    }
    end = pos_ + size;
    count = width == 1 ? u8() : u32();
    // Every element takes at least one byte (its constructor), except in
    // arrays, which the caller bounds itself.
    if (code != 0xe0 && code != 0xf0 && count > end - pos_) {
        return fail(codec_errc::bad_constructor, at,
                    describe_code(code) + " declares " + std::to_string(count) + " elements in " +
                        std::to_string(end - pos_) + " byte(s)");
    }
    return true;
}

bool value_cursor::close_compound(uint8_t code, size_t at, size_t end) {
    if (pos_ != end) {
        return fail(codec_errc::bad_constructor, at,
                    describe_code(code) + " declares size ending at offset " + std::to_string(end) +
                        " but its elements end at offset " + std::to_string(pos_));
    }
    return true;
}

bool value_cursor::skip_array(uint8_t code, size_t at, size_t limit, int depth) {
    // Arrays of arrays nest through skip_body, not skip_value: bound them here.
    if (depth > max_value_depth) {
        return fail(codec_errc::bad_constructor, at,
                    "values nested more than " + std::to_string(max_value_depth) + " deep");
    }
    size_t end = 0;
    uint32_t count = 0;
    if (!open_compound(code, at, limit, end, count)) {
        return false;
    }
    // The element constructor: a format code, or 0x00 descriptor constructor.
    int ctor_depth = depth;
    uint8_t elem = 0;
    size_t elem_at = 0;
    for (;;) {
        if (!need(1, end, "an array element constructor")) {
            return false;
        }
        elem_at = pos_;
        elem = u8();
        if (elem != 0x00) {
            break;
        }
        if (!skip_value(end, ++ctor_depth)) {
            return false;
        }
    }
    if (const int w = fixed_width(elem); w >= 0) {
        const uint64_t bytes = uint64_t{count} * static_cast<uint64_t>(w);
        if (bytes > end - pos_) {
            return fail(codec_errc::truncated, at,
                        describe_code(code) + " of " + std::to_string(count) + " " + type_name(elem) +
                            " needs " + std::to_string(bytes) + " byte(s) of elements, its size leaves " +
                            std::to_string(end - pos_));
        }
        pos_ += static_cast<size_t>(bytes);
        return close_compound(code, at, end);
    }
    if (!is_sized(elem)) {
        return fail(codec_errc::bad_constructor, elem_at, "unknown array element format code " + hex_byte(elem));
    }
    // Variable-width elements take at least one byte each.
    if (count > end - pos_) {
        return fail(codec_errc::bad_constructor, at,
                    describe_code(code) + " declares " + std::to_string(count) + " elements in " +
                        std::to_string(end - pos_) + " byte(s)");
    }
    for (uint32_t i = 0; i < count; ++i) {
        if (!skip_body(elem, elem_at, end, ctor_depth + 1)) {
            return false;
        }
    }
    return close_compound(code, at, end);
}


} // namespace wharf::amqp
