#pragma once
// Small text helpers for messages that name what they refer to.

#include "broker/common/names.hpp"

#include <cstdio>
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

// s for a description that names what a peer sent (an AMQP string, often a
// C string on the way): its UTF-8 as it is, but each control character and
// each byte that is not UTF-8 as \xNN. A NUL would cut the description
// short, and bytes that are not UTF-8 would make a client that decodes the
// string fail on what it sent us. Longer than `max` bytes, it is cut (at
// a character's start) and ends in "...".
inline std::string printable(std::string_view s, size_t max = std::string_view::npos) {
    std::string out;
    out.reserve(s.size());
    auto escape = [&out](unsigned char c) {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
    };
    while (!s.empty()) {
        const size_t good = utf8_prefix(s);
        for (const char ch : s.substr(0, good)) {
            const auto c = static_cast<unsigned char>(ch);
            if (c < 0x20 || c == 0x7f) escape(c);
            else out += ch;
        }
        if (good == s.size()) break;
        escape(static_cast<unsigned char>(s[good]));
        s.remove_prefix(good + 1);
    }
    if (out.size() > max) {
        size_t cut = max;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
        // Nor inside an escape: a \xNN that would lose its end goes whole.
        const size_t slash = out.rfind('\\', cut == 0 ? 0 : cut - 1);
        if (slash != std::string::npos && slash + 4 > cut && slash + 1 < out.size() && out[slash + 1] == 'x')
            cut = slash;
        out.resize(cut);
        out += "...";
    }
    return out;
}

} // namespace wharf
