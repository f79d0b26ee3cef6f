#pragma once
// Small helpers over Proton-C calls. Any thread that owns the object.

#include "broker/common/errors.hpp"
#include "broker/common/text.hpp"

#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/terminus.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace wharf::server {

// The description as AMQP carries it: UTF-8 (control characters and other
// bytes escaped: it may quote what a peer sent, and a NUL would cut it
// short) and at most `max` bytes, so that the frame it goes in (a
// disposition, a detach: neither can be split) fits the peer's
// max-frame-size, whatever it quotes (see condition_budget).
inline constexpr size_t max_condition_description = 1024;
inline void set_condition(pn_condition_t* c, errc code, std::string_view description,
                          size_t max = max_condition_description) {
    const std::string name(to_condition(code));
    const std::string desc = printable(description, max);
    pn_condition_set_name(c, name.c_str());
    pn_condition_set_description(c, desc.c_str());
}

// How long a condition's description may be for a peer whose max-frame-size
// is `remote_max_frame` (0: none): what is left of the frame after the
// frame header, the performative and the condition's name (160 bytes are
// more than any of ours needs), and never more than 1,024. AMQP's smallest
// max-frame-size, 512, leaves 352.
inline size_t condition_budget(uint32_t remote_max_frame) {
    if (remote_max_frame == 0 || remote_max_frame >= max_condition_description + 160) return max_condition_description;
    return remote_max_frame > 160 + 64 ? remote_max_frame - 160 : 64;
}

// Takes the whole of an incoming delivery off its link into `out` (and
// advances the link); false while it is not readable or still partial
// (Proton gathers its frames).
inline bool take_whole(pn_delivery_t* d, std::string& out) {
    if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return false;
    pn_link_t* l = pn_delivery_link(d);
    out.assign(pn_delivery_pending(d), '\0');
    pn_link_recv(l, out.data(), out.size());
    pn_link_advance(l);
    return true;
}

// One AMQP value as encoded bytes ("" when `d` holds none).
inline std::string encoded(pn_data_t* d) {
    if (d == nullptr || pn_data_size(d) == 0) return {};
    pn_data_rewind(d);
    std::string out(256, '\0');
    for (;;) {
        const ssize_t n = pn_data_encode(d, out.data(), out.size());
        if (n >= 0) {
            out.resize(static_cast<size_t>(n));
            return out;
        }
        if (n != PN_OVERFLOW) return {};
        out.resize(out.size() * 2);
    }
}

inline std::string terminus_address(pn_terminus_t* t) {
    const char* a = pn_terminus_get_address(t);
    return a ? std::string(a) : std::string();
}

// A string (or symbol) value of the peer's link properties, or "".
inline std::string remote_link_property(pn_link_t* l, std::string_view key) {
    pn_data_t* d = pn_link_remote_properties(l);
    if (d == nullptr) return {};
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP) return {};
    std::string found;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        const bool key_matches = (pn_data_type(d) == PN_SYMBOL || pn_data_type(d) == PN_STRING) &&
                                 std::string_view(pn_data_type(d) == PN_SYMBOL ? pn_data_get_symbol(d).start
                                                                                : pn_data_get_string(d).start,
                                                  pn_data_type(d) == PN_SYMBOL ? pn_data_get_symbol(d).size
                                                                               : pn_data_get_string(d).size) == key;
        if (!pn_data_next(d)) break;
        if (key_matches && (pn_data_type(d) == PN_STRING || pn_data_type(d) == PN_SYMBOL)) {
            pn_bytes_t b = pn_data_type(d) == PN_STRING ? pn_data_get_string(d) : pn_data_get_symbol(d);
            found.assign(b.start, b.size);
        }
    }
    pn_data_exit(d);
    pn_data_rewind(d);
    return found;
}

// AMQP 1.0 §2.8.15 link redirect: where the client should attach instead,
// as the info map of the condition.
inline void put_redirect_info(pn_condition_t* cond, const std::string& host, uint16_t port,
                              const std::string& address) {
    pn_data_t* info = pn_condition_info(cond);
    pn_data_clear(info);
    pn_data_put_map(info);
    pn_data_enter(info);
    auto put = [info](const char* key, const std::string& value) {
        pn_data_put_symbol(info, pn_bytes(std::strlen(key), key));
        pn_data_put_string(info, pn_bytes(value.size(), value.data()));
    };
    put("hostname", host);
    put("network-host", host);
    pn_data_put_symbol(info, pn_bytes(4, "port"));
    pn_data_put_uint(info, port);
    put("address", address);
    pn_data_exit(info);
}

} // namespace wharf::server
