#include "broker/server/relay_protocol.hpp"

#include "broker/server/pn_util.hpp"

#include <proton/codec.h>
#include <proton/disposition.h>
#include <proton/link.h>

namespace wharf::server::relay {

namespace {
std::string encode(pn_data_t* d) { return encoded(d); }

void decode(const std::string& bytes, pn_data_t* d) {
    pn_data_clear(d);
    if (!bytes.empty()) pn_data_decode(d, bytes.data(), bytes.size());
}
} // namespace

terminus capture(pn_terminus_t* t) {
    terminus out;
    out.type = pn_terminus_get_type(t);
    const char* a = pn_terminus_get_address(t);
    out.has_address = a != nullptr;
    if (a != nullptr) out.address = a;
    out.dynamic = pn_terminus_is_dynamic(t);
    out.durability = pn_terminus_get_durability(t);
    out.expiry = pn_terminus_get_expiry_policy(t);
    out.timeout = pn_terminus_get_timeout(t);
    out.distribution = pn_terminus_get_distribution_mode(t);
    out.properties = encode(pn_terminus_properties(t));
    out.capabilities = encode(pn_terminus_capabilities(t));
    out.outcomes = encode(pn_terminus_outcomes(t));
    out.filter = encode(pn_terminus_filter(t));
    return out;
}

void apply(const terminus& from, pn_terminus_t* to) {
    pn_terminus_set_type(to, from.type);
    pn_terminus_set_address(to, from.has_address ? from.address.c_str() : nullptr);
    pn_terminus_set_dynamic(to, from.dynamic);
    pn_terminus_set_durability(to, from.durability);
    pn_terminus_set_expiry_policy(to, from.expiry);
    pn_terminus_set_timeout(to, from.timeout);
    pn_terminus_set_distribution_mode(to, from.distribution);
    decode(from.properties, pn_terminus_properties(to));
    decode(from.capabilities, pn_terminus_capabilities(to));
    decode(from.outcomes, pn_terminus_outcomes(to));
    decode(from.filter, pn_terminus_filter(to));
}

condition capture(pn_condition_t* c) {
    condition out;
    if (c == nullptr || !pn_condition_is_set(c)) return out;
    const char* n = pn_condition_get_name(c);
    const char* d = pn_condition_get_description(c);
    out.name = n ? n : "";
    out.description = d ? d : "";
    out.info = encode(pn_condition_info(c));
    return out;
}

void apply(const condition& from, pn_condition_t* to, size_t max_description) {
    if (!from.set()) return;
    pn_condition_set_name(to, from.name.c_str());
    pn_condition_set_description(to, printable(from.description, max_description).c_str());
    decode(from.info, pn_condition_info(to));
}

state capture_remote(pn_delivery_t* d) {
    state s;
    s.type = pn_delivery_remote_state(d);
    pn_disposition_t* disp = pn_delivery_remote(d);
    if (s.type == PN_REJECTED) s.cond = capture(pn_disposition_condition(disp));
    if (s.type == PN_MODIFIED) {
        s.failed = pn_disposition_is_failed(disp);
        s.undeliverable = pn_disposition_is_undeliverable(disp);
        s.annotations = encode(pn_disposition_annotations(disp));
    }
    return s;
}

void apply_local(const state& s, pn_delivery_t* d) {
    pn_disposition_t* disp = pn_delivery_local(d);
    if (s.type == PN_REJECTED) apply(s.cond, pn_disposition_condition(disp));
    if (s.type == PN_MODIFIED) {
        pn_disposition_set_failed(disp, s.failed);
        pn_disposition_set_undeliverable(disp, s.undeliverable);
        decode(s.annotations, pn_disposition_annotations(disp));
    }
}

void send(pn_link_t* l, const message& m) {
    pn_delivery_t* d = pn_delivery(l, pn_dtag(m.tag.data(), m.tag.size()));
    pn_link_send(l, m.bytes.data(), m.bytes.size());
    pn_link_advance(l);
    if (m.settled) pn_delivery_settle(d);
    else pn_delivery_set_context(d, reinterpret_cast<void*>(static_cast<uintptr_t>(m.id)));
}

uint64_t id_of(pn_delivery_t* d) { return reinterpret_cast<uintptr_t>(pn_delivery_get_context(d)); }

void capture_state(message& m, pn_delivery_t* d) {
    m.state = pn_delivery_remote_state(d);
    if (m.state == PN_REJECTED || m.state == PN_MODIFIED) m.x().st = capture_remote(d);
}

void settle(const message& m, unsettled_map& unsettled) {
    auto it = unsettled.find(m.id);
    if (it == unsettled.end()) return;
    pn_delivery_t* d = it->second;
    if (m.state != 0) {
        if (m.more) apply_local(m.more->st, d);
        pn_delivery_update(d, m.state);
    }
    if (m.settled) {
        pn_delivery_settle(d);
        unsettled.erase(it);
    }
}

} // namespace wharf::server::relay
