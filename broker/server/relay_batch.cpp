#include "broker/server/relay_batch.hpp"

#include "broker/server/pn_util.hpp"

#include <proton/codec.h>

#include <charconv>

namespace wharf::server::relay {

namespace {
std::string_view view(pn_bytes_t b) { return {b.start, b.size}; }
pn_bytes_t bytes_of(std::string_view s) { return pn_bytes(s.size(), s.data()); }
} // namespace

void append_record(std::string& out, bool settled, std::string_view bytes) {
    const auto n = static_cast<uint32_t>(bytes.size());
    const char head[5] = {static_cast<char>(settled ? 1 : 0), static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8), static_cast<char>(n)};
    out.append(head, sizeof head);
    out.append(bytes);
}

bool parse_batch(std::string_view in, std::vector<record>& out) {
    out.clear();
    while (!in.empty()) {
        if (in.size() < 5) return false;
        const auto* p = reinterpret_cast<const unsigned char*>(in.data());
        const uint32_t n = (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | p[4];
        if ((p[0] & ~1u) != 0 || in.size() - 5 < n) return false;
        out.push_back({(p[0] & 1u) != 0, in.substr(5, n)});
        in.remove_prefix(5 + size_t{n});
    }
    return !out.empty();
}

uint32_t batch_size(pn_link_t* l) {
    const std::string v = remote_link_property(l, batch_property);
    uint32_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size()) return 0;
    return n;
}

void offer_batch(pn_link_t* l, uint32_t n) {
    const std::string v = std::to_string(n);
    pn_data_t* d = pn_link_properties(l);
    pn_data_clear(d);
    pn_data_put_map(d);
    pn_data_enter(d);
    pn_data_put_symbol(d, bytes_of(batch_property));
    pn_data_put_string(d, bytes_of(v));
    pn_data_exit(d);
}

void put_failures(pn_condition_t* c, const std::vector<failure>& failures) {
    const std::string name(batch_failures);
    pn_condition_set_name(c, name.c_str());
    pn_condition_set_description(c, "some messages of the batch were not accepted");
    pn_data_t* d = pn_condition_info(c);
    pn_data_clear(d);
    pn_data_put_map(d);
    pn_data_enter(d);
    pn_data_put_symbol(d, pn_bytes(8, "failures"));
    pn_data_put_list(d);
    pn_data_enter(d);
    for (const failure& f : failures) {
        pn_data_put_list(d);
        pn_data_enter(d);
        pn_data_put_uint(d, f.index);
        pn_data_put_symbol(d, bytes_of(f.name));
        pn_data_put_string(d, bytes_of(f.description));
        pn_data_exit(d);
    }
    pn_data_exit(d);
    pn_data_exit(d);
}

std::vector<failure> get_failures(pn_condition_t* c) {
    std::vector<failure> out;
    const char* name = pn_condition_get_name(c);
    if (name == nullptr || std::string_view(name) != batch_failures) return out;
    pn_data_t* d = pn_condition_info(c);
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP) return out;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        const bool ours = pn_data_type(d) == PN_SYMBOL && view(pn_data_get_symbol(d)) == "failures";
        if (!pn_data_next(d)) break;
        if (!ours || pn_data_type(d) != PN_LIST) continue;
        pn_data_enter(d);
        while (pn_data_next(d)) {
            if (pn_data_type(d) != PN_LIST) continue;
            pn_data_enter(d);
            failure f;
            if (pn_data_next(d) && pn_data_type(d) == PN_UINT) f.index = pn_data_get_uint(d);
            if (pn_data_next(d) && pn_data_type(d) == PN_SYMBOL) f.name = view(pn_data_get_symbol(d));
            if (pn_data_next(d) && pn_data_type(d) == PN_STRING) f.description = view(pn_data_get_string(d));
            pn_data_exit(d);
            out.push_back(std::move(f));
        }
        pn_data_exit(d);
    }
    pn_data_exit(d);
    pn_data_rewind(d);
    return out;
}

} // namespace wharf::server::relay
