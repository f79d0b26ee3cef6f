#pragma once
// The names every layer checks the same way: a queue's name, a node's id (config's node-id,
// a route's node) and a node group's name (a route's group). Both end up in
// the WLM's metadata records, whose fields are `key=value` joined by ';' and
// whose lists are joined by ','.
//
// Pure; any thread.

#include "broker/common/limits.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace wharf {

// Where `s` stops being UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or s.size() if it is UTF-8 throughout.
inline size_t utf8_prefix(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t n = 0;
        unsigned char lo = 0x80, hi = 0xbf; // the second byte's range
        if (c >= 0xc2 && c <= 0xdf) n = 1;
        else if (c == 0xe0) n = 2, lo = 0xa0;
        else if (c == 0xed) n = 2, hi = 0x9f;
        else if (c >= 0xe1 && c <= 0xef) n = 2;
        else if (c == 0xf0) n = 3, lo = 0x90;
        else if (c == 0xf4) n = 3, hi = 0x8f;
        else if (c >= 0xf1 && c <= 0xf3) n = 3;
        else return i;
        if (s.size() - i <= n) return i;
        for (size_t k = 1; k <= n; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return i;
        }
        i += n + 1;
    }
    return i;
}

// Why `name` cannot be a queue's name, if it cannot: not empty, at most
// max_queue_name bytes, UTF-8, no control character (a NUL would also cut
// the name short wherever it is a C string, as in Proton's termini). (The
// config's check, management's and an attach's.)
inline std::optional<std::string> check_queue_name(std::string_view name) {
    if (name.empty()) return std::string("queue name must not be empty");
    if (name.size() > max_queue_name)
        return "queue name of " + std::to_string(name.size()) + " bytes is longer than " +
               std::to_string(max_queue_name);
    if (const size_t at = utf8_prefix(name); at != name.size())
        return "queue name is not UTF-8 (at byte " + std::to_string(at) + ")";
    for (size_t i = 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c < 0x20 || c == 0x7f) return "queue name has a control character (at byte " + std::to_string(i) + ")";
    }
    return std::nullopt;
}

// Why `id` cannot be a node id, if it cannot: one or more letters, digits,
// '-', '_' or '.'.
inline std::optional<std::string> check_node_id(std::string_view id) {
    if (id.empty()) return std::string("a node id must not be empty");
    for (unsigned char c : id) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
        if (!ok)
            return "'" + std::string(id) + "' is not a node id (letters, digits, '-', '_' and '.' only)";
    }
    return std::nullopt;
}

// Why `name` cannot be a node group's name, if it cannot: not empty, and
// none of ';', '=', ',' or a control character.
inline std::optional<std::string> check_group_name(std::string_view name) {
    if (name.empty()) return std::string("a group name must not be empty");
    for (unsigned char c : name) {
        if (c < 0x20 || c == 0x7f || c == ';' || c == '=' || c == ',')
            return "'" + std::string(name) + "' is not a group name (no ';', '=', ',' or control characters)";
    }
    return std::nullopt;
}

} // namespace wharf
