// A consumer's side of a client link: the engine's deliveries written to
// the link within its credit (what cannot be written goes back), and the
// client's outcomes passed to the engine. See link_events.cpp for the
// link's life and the producer side.

#include "broker/amqp/annotations.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/disposition.h>

#include <cstring>

namespace wharf::server {

void amqp_connection::handle(engine::ev_deliver& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr || lc->closed || lc->link == nullptr) return; // released on detach
    if (foreign_delivery(*lc)) return;                             // ended: released on the detach
    if (lc->batch != 0) return batch_deliver(*lc, ev);
    pn_link_t* l = lc->link;
    if (pn_link_credit(l) <= 0 || !lc->held.empty()) {
        if (ev.copy) {
            // A browser's copy (nothing to return): keep it until the
            // client gives credit again.
            lc->held.push_back(std::move(ev));
        } else {
            // Back to the queue, which sends it again once there is credit.
            mark_dirty(*lc);
            lc->unsent.push_back(ev.seq);
        }
        return;
    }
    send_delivery(*lc, ev);
}

void amqp_connection::send_held(link_ctx& lc) {
    if (foreign_delivery(lc)) return;
    while (!lc.held.empty() && lc.link != nullptr && pn_link_credit(lc.link) > 0) {
        send_delivery(lc, lc.held.front());
        lc.held.pop_front();
    }
}

void amqp_connection::send_delivery(link_ctx& lc_ref, engine::ev_deliver& ev) {
    link_ctx* lc = &lc_ref;
    pn_link_t* l = lc->link;
    const std::string_view bytes = wire_bytes(ev);
    if (lc->max_out != 0 && bytes.size() > lc->max_out) {
        // The client said it takes nothing larger (Proton would end its
        // link, and the message would come again): it stays in the queue
        // for the queue's other consumers (a browser's copy is passed by),
        // and the link's credit comes back.
        mark_dirty(*lc);
        lc->to_settle.push_back({ev.seq, engine::outcome_kind::too_large});
        return;
    }
    char tag[sizeof(uint64_t)];
    const uint64_t t = lc->next_tag++;
    std::memcpy(tag, &t, sizeof t);
    pn_delivery_t* d = pn_delivery(l, pn_dtag(tag, sizeof tag));
    pn_link_send(l, bytes.data(), bytes.size());
    pn_link_advance(l);
    ++lc->sent;
    if (!ev.settle_on_send) {
        pn_delivery_set_context(d, reinterpret_cast<void*>(static_cast<uintptr_t>(ev.seq)));
        return;
    }
    pn_delivery_settle(d);
    if (!ev.copy) settle_sent(*lc, ev.seq); // at-most-once: gone from the queue now
}

// A message sent pre-settled leaves the queue (the engine held it until now).
void amqp_connection::settle_sent(link_ctx& lc, uint64_t seq) {
    mark_dirty(lc);
    lc.to_settle.push_back({seq, engine::outcome_kind::accepted});
}

std::string_view amqp_connection::wire_bytes(const engine::ev_deliver& ev) {
    std::string_view bytes = ev.body.bytes();
    if (!ev.redelivered) return bytes;
    auto info = amqp::scan_message(bytes);
    if (!info) return bytes;
    amqp::header_fields h = info->header;
    h.delivery_count = ev.delivery_count;
    h.first_acquirer = false;
    scratch_ = amqp::with_header(bytes, *info, h);
    return scratch_;
}

void amqp_connection::handle(engine::ev_drained& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr || lc->closed || lc->link == nullptr) return;
    if (lc->batch != 0) return batch_drained(*lc);
    pn_link_drained(lc->link);
}

void amqp_connection::on_disposition(link_ctx& lc, pn_delivery_t* d) {
    auto seq = reinterpret_cast<uintptr_t>(pn_delivery_get_context(d));
    if (seq == 0) return; // pre-settled: nothing to settle
    pn_disposition_t* disp = pn_delivery_remote(d);
    const auto outcome = relay::outcome_for(pn_delivery_remote_state(d), pn_disposition_is_failed(disp),
                                            pn_disposition_is_undeliverable(disp), pn_delivery_settled(d));
    if (!outcome) return; // no terminal outcome yet (or received)
    std::optional<amqp::codec_error> bad;
    std::string annotations = modified_annotations(d, bad);
    mark_dirty(lc);
    lc.to_settle.push_back({seq, *outcome});
    if (!annotations.empty()) lc.annotations.push_back({seq, std::move(annotations)});
    pn_delivery_set_context(d, nullptr);
    pn_delivery_settle(d);
    if (bad) end_for_bad_annotations(lc, *bad);
}

std::string amqp_connection::modified_annotations(pn_delivery_t* d, std::optional<amqp::codec_error>& bad) {
    if (pn_delivery_remote_state(d) != PN_MODIFIED) return {};
    std::string map = encoded(pn_disposition_annotations(pn_delivery_remote(d)));
    if (map.empty()) return map;
    bad = amqp::check_annotations(map);
    if (bad) map.clear();
    return map;
}

void amqp_connection::end_for_bad_annotations(link_ctx& lc, const amqp::codec_error& why) {
    if (lc.closed || lc.link == nullptr) return;
    if (lc.relayed) relay_detach(lc, true);
    else detach_link(lc);
    set_condition(pn_link_condition(lc.link), errc::invalid_field,
                  "the modified outcome's message-annotations are not valid: " + why.description +
                      "; the outcome was applied without them");
    pn_link_close(lc.link);
}

} // namespace wharf::server
