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

// Why `name` cannot be a queue's name, if it cannot: not empty, at most
// max_queue_name bytes, no control character. (The config's check, and
// management's for a dead-letter address.)
inline std::optional<std::string> check_queue_name(std::string_view name) {
    if (name.empty()) return std::string("queue name must not be empty");
    if (name.size() > max_queue_name)
        return "queue name of " + std::to_string(name.size()) + " bytes is longer than " +
               std::to_string(max_queue_name);
    for (unsigned char c : name) {
        if (c < 0x20 || c == 0x7f) return "queue name '" + std::string(name) + "' contains a control character";
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
