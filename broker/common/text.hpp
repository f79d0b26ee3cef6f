#pragma once
// Small text helpers for messages that name what they refer to.

#include <string>
#include <string_view>

namespace wharf {

// s in single quotes, as error descriptions name keys, rules and queues:
// quoted("q1") == "'q1'". (Built by appending: GCC 12 at -O3 warns falsely
// about "'" + std::string(s).)
inline std::string quoted(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '\'';
    out += s;
    out += '\'';
    return out;
}

} // namespace wharf
