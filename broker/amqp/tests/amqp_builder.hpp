#pragma once
// Test-only helpers: build AMQP 1.0 encodings by hand (independently of the
// codec under test) and by Proton's C API (the reference encoder).

#include <proton/codec.h>
#include <proton/error.h>
#include <proton/message.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::amqp::test {

inline std::string bytes(std::initializer_list<int> v) {
    std::string s;
    for (int b : v) {
        s.push_back(static_cast<char>(b));
    }
    return s;
}

inline std::string be32(uint32_t v) {
    return bytes({int(v >> 24), int((v >> 16) & 0xff), int((v >> 8) & 0xff), int(v & 0xff)});
}
inline std::string be64(uint64_t v) { return be32(uint32_t(v >> 32)) + be32(uint32_t(v)); }

inline std::string sized8(int code, std::string_view s) { return bytes({code, int(s.size())}) + std::string(s); }
inline std::string sized32(int code, std::string_view s) { return bytes({code}) + be32(uint32_t(s.size())) + std::string(s); }
inline std::string str8(std::string_view s) { return sized8(0xa1, s); }
inline std::string sym8(std::string_view s) { return sized8(0xa3, s); }
inline std::string vbin8(std::string_view s) { return sized8(0xa0, s); }
inline std::string str32(std::string_view s) { return sized32(0xb1, s); }
inline std::string sym32(std::string_view s) { return sized32(0xb3, s); }
inline std::string vbin32(std::string_view s) { return sized32(0xb0, s); }

inline std::string concat(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) {
        s += i;
    }
    return s;
}
inline std::string compound8(int code, const std::vector<std::string>& items) {
    const std::string body = concat(items);
    return bytes({code, int(body.size() + 1), int(items.size())}) + body;
}
inline std::string compound32(int code, const std::vector<std::string>& items) {
    const std::string body = concat(items);
    return bytes({code}) + be32(uint32_t(body.size() + 4)) + be32(uint32_t(items.size())) + body;
}
inline std::string list8(const std::vector<std::string>& items) { return compound8(0xc0, items); }
inline std::string map8(const std::vector<std::string>& items) { return compound8(0xc1, items); }
inline std::string list32(const std::vector<std::string>& items) { return compound32(0xd0, items); }
inline std::string map32(const std::vector<std::string>& items) { return compound32(0xd1, items); }

// An array8: `ctor` is the element constructor, `elements` the element bodies.
inline std::string array8(std::string_view ctor, uint8_t count, std::string_view elements) {
    return bytes({0xe0, int(1 + ctor.size() + elements.size()), count}) + std::string(ctor) + std::string(elements);
}
inline std::string array32(std::string_view ctor, uint32_t count, std::string_view elements) {
    return bytes({0xf0}) + be32(uint32_t(4 + ctor.size() + elements.size())) + be32(count) + std::string(ctor) +
           std::string(elements);
}

// Section codes.
constexpr int header = 0x70, delivery_annotations = 0x71, message_annotations = 0x72, properties = 0x73,
              application_properties = 0x74, data = 0x75, amqp_sequence = 0x76, amqp_value = 0x77, footer = 0x78;

// A section with a smallulong descriptor (the usual encoding).
inline std::string section(int code, std::string_view value) { return bytes({0x00, 0x53, code}) + std::string(value); }
// A section with a full ulong descriptor.
inline std::string ulong_section(int code, std::string_view value) {
    return bytes({0x00, 0x80}) + be64(uint64_t(code)) + std::string(value);
}
// A section with a symbolic descriptor.
inline std::string symbol_section(std::string_view name, std::string_view value) {
    return bytes({0x00}) + sym8(name) + std::string(value);
}

// Copies `s` into a heap block of exactly its size, so that AddressSanitizer
// reports any read past the end (std::string has slack and SSO).
class exact_buffer {
  public:
    explicit exact_buffer(std::string_view s) : size_(s.size()), data_(new char[s.size() ? s.size() : 1]) {
        if (!s.empty()) {
            std::memcpy(data_.get(), s.data(), s.size());
        }
    }
    std::string_view view() const { return {data_.get(), size_}; }

  private:
    size_t size_;
    std::unique_ptr<char[]> data_;
};

// Proton reference encoder.
struct pn_message_deleter {
    void operator()(pn_message_t* m) const { pn_message_free(m); }
};
using pn_message_ptr = std::unique_ptr<pn_message_t, pn_message_deleter>;

inline pn_message_ptr make_pn_message() { return pn_message_ptr(pn_message()); }

inline std::string pn_encode(pn_message_t* m) {
    std::string buf(256, '\0');
    for (;;) {
        size_t n = buf.size();
        const int rc = pn_message_encode(m, buf.data(), &n);
        if (rc == PN_OVERFLOW) {
            buf.resize(buf.size() * 2);
            continue;
        }
        EXPECT_EQ(rc, 0) << "pn_message_encode failed";
        buf.resize(n);
        return buf;
    }
}

inline pn_bytes_t pn_str(std::string_view s) { return pn_bytes(s.size(), s.data()); }

} // namespace wharf::amqp::test
