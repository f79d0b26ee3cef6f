#pragma once
// Internal to broker/amqp: a bounds-checked cursor over AMQP 1.0 encoded
// bytes (AMQP 1.0 §1.6 primitive types, §1.2 constructors) that can skip any
// value structurally. message_codec.cpp builds the section logic on it.
//
// Holds a view of caller-owned bytes; one cursor per scan, on one thread.

#include "broker/amqp/message_codec.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::amqp {

// Values nest (lists in lists, described descriptors); the cursor refuses
// anything deeper so a hostile message cannot exhaust the stack.
constexpr int max_value_depth = 64;

// Width in bytes of a fixed-width primitive, or -1 when `code` is not one.
int fixed_width(uint8_t code);
// Variable-width, compound and array codes: those with a size field.
bool is_sized(uint8_t code);
// "str8", "list32", ...; "unknown" for codes AMQP 1.0 does not define.
const char* type_name(uint8_t code);
// The AMQP type a code encodes, as the spec names it: "string" for str8
// and str32, "ulong" for ulong0, smallulong and ulong, "described" ...
const char* type_family(uint8_t code);
// "str8 (0xa1)".
std::string describe_code(uint8_t code);
std::string hex_byte(uint8_t b);

// Every method that can fail returns false after recording the first error
// (with its byte offset); callers just propagate false. Reads below take a
// `limit`: the end of the enclosing value, which they never cross.
class value_cursor {
  public:
    explicit value_cursor(std::string_view bytes)
        : data_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()) {}

    size_t pos() const { return pos_; }
    size_t size() const { return size_; }
    bool at_end() const { return pos_ == size_; }
    codec_error take_error() { return std::move(error_); }

    // Records an error at `offset`; always returns false.
    bool fail(codec_errc code, size_t offset, std::string what);

    // Ensures `n` bytes are readable before `limit`; `what` names the thing
    // being read, for the error.
    bool need(size_t n, size_t limit, const char* what) {
        return limit - pos_ >= n || truncated(n, limit, what);
    }

    // Unchecked reads: call need() first.
    uint8_t peek() const { return data_[pos_]; }
    uint8_t u8() { return data_[pos_++]; }
    uint32_t u32() {
        const uint8_t* p = data_ + pos_;
        pos_ += 4;
        return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
    }
    uint64_t u64() {
        const uint64_t hi = u32();
        return (hi << 32) | u32();
    }
    // The bytes from offset `from` up to where the cursor is.
    std::string_view since(size_t from) const {
        return {reinterpret_cast<const char*>(data_ + from), pos_ - from};
    }
    std::string_view take(size_t n) {
        std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
        pos_ += n;
        return s;
    }

    // Reads a size or count field of `width` (1 or 4) bytes.
    bool read_width(int width, size_t limit, const char* what, uint32_t& out) {
        if (!need(width, limit, what)) {
            return false;
        }
        out = width == 1 ? u8() : u32();
        return true;
    }

    // Skips one complete value (constructor and body).
    bool skip_value(size_t limit, int depth);

    // Steps over one complete value by its declared size, without visiting
    // a compound's elements: for bytes skip_value has already accepted.
    bool jump_value(size_t limit, int depth);

    // Skips the body of a value whose format code `code`, read at offset
    // `at`, has already been consumed. Array elements are such bodies.
    bool skip_body(uint8_t code, size_t at, size_t limit, int depth);

    // Reads the size and count of a list, map or array whose format code
    // (read at `at`) was just consumed; leaves the cursor on the count's
    // successor and sets `end` to where the compound's bytes end.
    bool open_compound(uint8_t code, size_t at, size_t limit, size_t& end, uint32_t& count);

    // Checks that the elements of the compound opened at `at` end at `end`.
    bool close_compound(uint8_t code, size_t at, size_t end);

  private:
    bool read_constructor(size_t limit, int depth, size_t& at, uint8_t& code);
    bool truncated(size_t n, size_t limit, const char* what);
    bool skip_array(uint8_t code, size_t at, size_t limit, int depth);

    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
    codec_error error_{codec_errc::truncated, {}};
};

} // namespace wharf::amqp
