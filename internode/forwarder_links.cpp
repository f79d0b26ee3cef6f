// forwarder: sender links, transfers and the peer's dispositions. Proactor
// thread only, inside the connection's event batch.

#include "internode/forwarder_impl.hpp"

#include <proton/codec.h>
#include <proton/disposition.h>
#include <proton/terminus.h>

#include <cstring>

namespace wharf::internode {

link_state* forwarder::impl::state_of(pn_link_t* l) {
    return static_cast<link_state*>(pn_link_get_context(l));
}

void forwarder::impl::route(pending_message m) {
    link_state& ls = link_for(m.address);
    ls.queued.push_back(std::move(m));
    pump(ls);
}

// The open sender link for `address`, attaching one if there is none (the
// first message for it, or the peer ended the previous one).
link_state& forwarder::impl::link_for(const std::string& address) {
    if (auto it = links_.find(address); it != links_.end()) return *it->second;
    if (session_ == nullptr) {
        session_ = pn_session(conn_);
        pn_session_open(session_);
    }
    auto ls = std::make_unique<link_state>();
    ls->address = address;
    // Unique on this connection; the address only helps whoever reads logs.
    const std::string name = std::string(pn_connection_get_container(conn_)) + "/fwd-" +
                             std::to_string(++link_counter_) + ":" + address;
    pn_link_t* l = pn_sender(session_, name.c_str());
    pn_terminus_set_address(pn_link_target(l), address.c_str());
    // Unsettled, and the peer settles first: its disposition is final, and
    // we settle on receipt (no third leg).
    pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
    if (!opts_.link_properties.empty()) {
        pn_data_t* props = pn_link_properties(l);
        pn_data_clear(props);
        pn_data_put_map(props);
        pn_data_enter(props);
        for (const auto& [key, value] : opts_.link_properties) {
            pn_data_put_symbol(props, pn_bytes(key.size(), key.data()));
            pn_data_put_string(props, pn_bytes(value.size(), value.data()));
        }
        pn_data_exit(props);
    }
    pn_link_set_context(l, ls.get());
    pn_link_open(l);
    ls->link = l;
    link_state& ref = *ls;
    links_.emplace(address, std::move(ls));
    return ref;
}

// Sends queued messages while the peer's credit lasts. pn_link_send copies
// the bytes into Proton, which frames them as they are (several transfer
// frames if the message is larger than a frame).
void forwarder::impl::pump(link_state& ls) {
    pn_link_t* l = ls.link;
    while (!ls.queued.empty() && pn_link_credit(l) > 0) {
        pending_message m = std::move(ls.queued.front());
        ls.queued.pop_front();
        const uint64_t tag = ls.next_tag++;
        char tag_bytes[sizeof tag];
        std::memcpy(tag_bytes, &tag, sizeof tag);
        pn_delivery_t* d = pn_delivery(l, pn_dtag(tag_bytes, sizeof tag_bytes));
        pn_delivery_set_context(d, reinterpret_cast<void*>(static_cast<uintptr_t>(tag)));
        const ssize_t n = pn_link_send(l, m.bytes.data(), m.bytes.size());
        if (n < 0 || static_cast<size_t>(n) != m.bytes.size()) {
            pn_delivery_abort(d);
            report(std::move(m.done), forward_result::failed,
                   "Proton did not take the message bytes (pn_link_send returned " +
                       std::to_string(n) + ")");
            continue;
        }
        pn_link_advance(l);
        ls.unsettled.emplace(tag, std::move(m.done));
    }
}

void forwarder::impl::on_flow(pn_link_t* l) {
    link_state* ls = state_of(l);
    if (ls == nullptr) return;
    pump(*ls);
    // A peer that asks us to drain gets the rest of its credit back at once
    // when nothing is waiting (a no-op without drain).
    if (ls->queued.empty()) pn_link_drained(l);
}

void forwarder::impl::on_delivery(pn_delivery_t* d) {
    link_state* ls = state_of(pn_delivery_link(d));
    if (ls == nullptr) return; // the link has ended; its messages were failed then
    const auto tag = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pn_delivery_get_context(d)));
    auto it = ls->unsettled.find(tag);
    if (it == ls->unsettled.end()) return;
    pn_disposition_t* remote = pn_delivery_remote(d);
    forward_outcome out;
    switch (pn_delivery_remote_state(d)) {
    case PN_ACCEPTED:
        out.result = forward_result::accepted;
        break;
    case PN_REJECTED:
        out.result = forward_result::rejected;
        out.description =
            condition_text(pn_disposition_condition(remote), "rejected without a condition");
        break;
    case PN_RELEASED:
        out.result = forward_result::released;
        break;
    case PN_MODIFIED:
        out.result = forward_result::modified;
        if (pn_disposition_is_failed(remote)) out.description = "delivery-failed";
        if (pn_disposition_is_undeliverable(remote))
            out.description += out.description.empty() ? "undeliverable-here" : ", undeliverable-here";
        break;
    default:
        // No outcome yet (none, or the non-terminal `received`): wait for one,
        // unless the peer settled without giving any.
        if (!pn_delivery_settled(d)) return;
        out = {forward_result::failed, "settled by the peer without an outcome"};
        break;
    }
    report(std::move(it->second), out.result, std::move(out.description));
    ls->unsettled.erase(it);
    pn_delivery_settle(d); // frees it: erased from `unsettled` first
}

// The peer detached or closed one link (a refused attach comes this way:
// an attach with a null target, then a detach with the reason). Its messages
// fail with the peer's condition; the next send() to the address attaches a
// new link.
void forwarder::impl::on_link_remote_end(pn_link_t* l, bool closed) {
    if (!(pn_link_state(l) & PN_LOCAL_CLOSED)) {
        if (closed) pn_link_close(l);
        else pn_link_detach(l);
    }
    link_state* ls = state_of(l);
    if (ls == nullptr) return;
    const std::string fallback =
        "link to '" + ls->address + "' " + (closed ? "closed" : "detached") + " by " + peer_;
    const std::string why = condition_text(pn_link_remote_condition(l), fallback);
    const std::string address = ls->address;
    fail_link(*ls, why);
    links_.erase(address);
}

// Ending a session detaches all its links (AMQP 1.0 §2.7.7).
void forwarder::impl::on_session_remote_end(pn_session_t* s) {
    if (s == session_) {
        fail_all_links(condition_text(pn_session_remote_condition(s), "session ended by " + peer_));
        session_ = nullptr; // the next link begins a new one
    }
    if (!(pn_session_state(s) & PN_LOCAL_CLOSED)) pn_session_close(s);
}

// Reports every message of the link as failed, sent ones first, in order.
// The Proton link stays (Proton frees it with the connection) but no longer
// points at us, so its later events are ignored.
void forwarder::impl::fail_link(link_state& ls, const std::string& why) {
    if (ls.link != nullptr) pn_link_set_context(ls.link, nullptr);
    ls.link = nullptr;
    for (auto& [tag, done] : ls.unsettled) report(std::move(done), forward_result::failed, why);
    ls.unsettled.clear();
    for (auto& m : ls.queued) report(std::move(m.done), forward_result::failed, why);
    ls.queued.clear();
}

void forwarder::impl::fail_all_links(const std::string& why) {
    for (auto& [address, ls] : links_) fail_link(*ls, why);
    links_.clear();
}

} // namespace wharf::internode
