#include "broker/server/relay_batch.hpp"

#include "broker/server/pn_util.hpp"

#include <proton/codec.h>
#include <proton/disposition.h>

#include <charconv>

namespace wharf::server::relay {

namespace {
std::string_view view(pn_bytes_t b) { return {b.start, b.size}; }

void put_be(char* out, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xff);
}
uint64_t get_be(const char* in, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
    return v;
}

uint64_t number(const std::string& v) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec != std::errc() || end != v.data() + v.size() ? 0 : n;
}
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
    const uint64_t n = number(remote_link_property(l, batch_property));
    return n > UINT32_MAX ? 0 : static_cast<uint32_t>(n);
}

uint64_t relay_link(pn_link_t* l) { return number(remote_link_property(l, relay_link_property)); }

bool credit_records(pn_link_t* l) { return remote_link_property(l, credit_property) == credit_records_value; }

bool presettled_acks(pn_link_t* l) {
    const std::string v = remote_link_property(l, presettled_property);
    return v == presettled_acks_value || v == presettled_detach_value;
}

bool presettled_detach_answers(pn_link_t* l) {
    return remote_link_property(l, presettled_property) == presettled_detach_value;
}

bool annotated_outcomes(pn_link_t* l) {
    return remote_link_property(l, outcomes_property) == outcomes_annotated_value;
}

bool prefix_answers(pn_link_t* l) { return remote_link_property(l, answers_property) == answers_prefix_value; }

void offer_batch(pn_link_t* l, uint32_t n, uint64_t link, bool credit_records, std::string_view presettled,
                 bool annotated, bool prefix) {
    const std::string v = std::to_string(n);
    const std::string id = std::to_string(link);
    pn_data_t* d = pn_link_properties(l);
    pn_data_clear(d);
    pn_data_put_map(d);
    pn_data_enter(d);
    pn_data_put_symbol(d, bytes_of(batch_property));
    pn_data_put_string(d, bytes_of(v));
    if (link != 0) {
        pn_data_put_symbol(d, bytes_of(relay_link_property));
        pn_data_put_string(d, bytes_of(id));
    }
    if (credit_records) {
        pn_data_put_symbol(d, bytes_of(credit_property));
        pn_data_put_string(d, bytes_of(credit_records_value));
    }
    if (!presettled.empty()) {
        pn_data_put_symbol(d, bytes_of(presettled_property));
        pn_data_put_string(d, bytes_of(presettled));
    }
    if (annotated) {
        pn_data_put_symbol(d, bytes_of(outcomes_property));
        pn_data_put_string(d, bytes_of(outcomes_annotated_value));
    }
    if (prefix) {
        pn_data_put_symbol(d, bytes_of(answers_property));
        pn_data_put_string(d, bytes_of(answers_prefix_value));
    }
    pn_data_exit(d);
}

void put_delivery_header(char (&out)[delivery_header], uint8_t flags, uint64_t seq, size_t length) {
    out[0] = static_cast<char>(flags);
    put_be(out + 1, seq, 8);
    put_be(out + 9, length, 4);
}

bool parse_deliveries(std::string_view in, std::vector<delivery_record>& out) {
    out.clear();
    while (!in.empty()) {
        if (in.size() < delivery_header) return false;
        const auto flags = static_cast<uint8_t>(in[0]);
        const uint64_t n = get_be(in.data() + 9, 4);
        if ((flags & ~(presettled | drained)) != 0 || in.size() - delivery_header < n) return false;
        out.push_back({flags, get_be(in.data() + 1, 8), in.substr(delivery_header, n)});
        in.remove_prefix(delivery_header + n);
    }
    return !out.empty();
}

void append_control(std::string& out, const control& c) {
    char rec[control_size];
    rec[0] = static_cast<char>(c.what);
    put_be(rec + 1, c.link, 8);
    put_be(rec + 9, c.value, 8);
    rec[17] = static_cast<char>(c.arg);
    out.append(rec, sizeof rec);
    if (c.what != control::annotated) return;
    char length[4];
    put_be(length, c.annotations.size(), 4);
    out.append(length, sizeof length);
    out.append(c.annotations);
}

std::optional<engine::outcome_kind> outcome_for(uint64_t state, bool failed, bool undeliverable, bool settled) {
    using engine::outcome_kind;
    switch (state) {
    case PN_ACCEPTED: return outcome_kind::accepted;
    case PN_REJECTED: return outcome_kind::rejected;
    case PN_RELEASED: return outcome_kind::released;
    case PN_MODIFIED:
        return failed && undeliverable ? outcome_kind::modified_failed_undeliverable
               : failed               ? outcome_kind::modified_failed
               : undeliverable        ? outcome_kind::modified_undeliverable
                                      : outcome_kind::released;
    default:
        if (!settled) return std::nullopt;
        return outcome_kind::accepted;
    }
}

bool parse_controls(std::string_view in, std::vector<control>& out) {
    out.clear();
    if (in.empty()) return false;
    while (!in.empty()) {
        if (in.size() < control_size) return false;
        const auto kind = static_cast<uint8_t>(in[0]);
        if (kind < control::credit || kind > control::accepted) return false;
        out.push_back({static_cast<control::kind>(kind), get_be(in.data() + 1, 8), get_be(in.data() + 9, 8),
                       static_cast<uint8_t>(in[17]), {}});
        in.remove_prefix(control_size);
        if (kind != control::annotated) continue;
        if (in.size() < 4) return false;
        const uint64_t n = get_be(in.data(), 4);
        if (in.size() - 4 < n) return false;
        out.back().annotations = in.substr(4, n);
        in.remove_prefix(4 + n);
    }
    return true;
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
