#pragma once
// etcd_wire: what etcd's JSON gateway puts on the wire that JSON itself does
// not say — keys and values are base64, 64-bit integers are strings, and an
// error is {"error", "code", "message"} (or {"error": {...}} in a stream).
// Private to wlm/metadata.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::wlm::detail {

inline std::string base64_encode(std::string_view in) {
    static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
        out += table[(n >> 18) & 63];
        out += table[(n >> 12) & 63];
        out += table[(n >> 6) & 63];
        out += table[n & 63];
    }
    if (i + 1 == in.size()) {
        const uint32_t n = uint8_t(in[i]) << 16;
        out += table[(n >> 18) & 63];
        out += table[(n >> 12) & 63];
        out += "==";
    } else if (i + 2 == in.size()) {
        const uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
        out += table[(n >> 18) & 63];
        out += table[(n >> 12) & 63];
        out += table[(n >> 6) & 63];
        out += '=';
    }
    return out;
}

// Decodes standard or URL-safe base64; stops at '=' or anything else.
inline std::string base64_decode(std::string_view in) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        const int v = value(c);
        if (v < 0) break;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xff);
        }
    }
    return out;
}

// An int64 field (a JSON string or number); 0 when absent, as the gateway
// leaves out zero values.
inline int64_t int_field(const nlohmann::json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return 0;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_string()) {
        try {
            return std::stoll(it->get<std::string>());
        } catch (...) {
            return 0;
        }
    }
    return 0;
}

inline std::string bytes_field(const nlohmann::json& j, const char* name) {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? base64_decode(it->get<std::string>()) : std::string();
}

inline bool bool_field(const nlohmann::json& j, const char* name) {
    auto it = j.find(name);
    return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The gRPC status an error reply carries (0: none) and its message.
struct wire_error {
    int code = 0;
    std::string message;
};
inline wire_error error_of(const nlohmann::json& j) {
    auto it = j.find("error");
    if (it == j.end()) return {};
    if (it->is_object()) {
        return {static_cast<int>(int_field(*it, "grpc_code")), it->value("message", std::string("error"))};
    }
    std::string msg = j.value("message", it->is_string() ? it->get<std::string>() : std::string("error"));
    return {static_cast<int>(int_field(j, "code")), msg.empty() ? std::string("error") : msg};
}

// The smallest key above every key that starts with `prefix` ("\0": none).
inline std::string range_end_of(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
    if (end.empty()) return std::string(1, '\0');
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    return end;
}

} // namespace wharf::wlm::detail
