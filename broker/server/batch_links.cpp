// amqp_connection: the links of another node's relay that carry its
// clients' messages several to a delivery (see relay_batch.hpp): a relayed
// producer's batches in, a relayed consumer's batches out, and the relay's
// control records (its consumers' credit and outcomes).

#include "broker/amqp/annotations.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/delivery.h>
#include <proton/disposition.h>

#include <cstring>

namespace wharf::server {

void amqp_connection::on_batch(link_ctx& lc, pn_delivery_t* d) {
    pn_link_t* l = lc.link;
    if (l == nullptr || !pn_delivery_readable(d)) return;
    if (pn_delivery_aborted(d)) {
        // It spent a delivery of Proton's credit (the settle advances the
        // link) and no message: the top-up gives the delivery back.
        lc.partial.clear();
        lc.oversize = false;
        pn_delivery_settle(d);
        top_up_credit(lc);
        return;
    }
    // A batch may span frames: gather it whole. A relay stops filling a
    // batch at max_batch_bytes, so beyond that plus one message of the
    // largest size allowed it is not a batch a relay made: count, discard.
    const uint64_t max = settings_.max_message_size;
    const size_t pending = pn_delivery_pending(d);
    const size_t old = lc.partial.size();
    if (!lc.oversize) {
        lc.partial.resize(old + pending);
        pn_link_recv(l, lc.partial.data() + old, pending);
        lc.oversize = lc.partial.size() > relay::max_batch_bytes + max + 5;
    } else {
        std::string sink(pending, '\0');
        pn_link_recv(l, sink.data(), pending);
    }
    if (lc.oversize) lc.partial.clear();
    if (pn_delivery_partial(d)) return;
    pn_link_advance(l);
    std::string bytes;
    bytes.swap(lc.partial);
    const bool presettled = pn_delivery_settled(d);
    const bool too_big = lc.oversize;
    lc.oversize = false;
    std::vector<relay::record> records;
    // More records than the attach agreed on is not a batch a relay made
    // either (each record's outcome goes back in one disposition, which
    // must fit a frame).
    if (!too_big && (!relay::parse_batch(bytes, records) || records.size() > lc.batch)) {
        // Not a batch a relay made: how many messages it stood for, and so
        // the credit both ends count, is lost. End the link (the relay ends
        // its client's with this condition) rather than drift until the
        // producer stalls.
        if (presettled) pn_delivery_settle(d);
        else reject_now(d, errc::decode_error, "relay batch is malformed");
        end_link(lc, errc::decode_error, "relay batch is malformed: the link's message count is lost");
        return;
    }
    if (too_big) {
        ++lc.batch_in; // a relay sends a message this large in a batch of its own
        const error big{errc::message_size_exceeded,
                        "message is larger than this link's max-message-size of " + std::to_string(max) + " bytes"};
        if (!presettled) {
            reject_now(d, big.code, big.description);
        } else {
            pn_delivery_settle(d);
            refuse_presettled(lc, big); // ends the link
        }
        if (!lc.closed) top_up_credit(lc);
        return;
    }
    lc.batch_in += records.size();
    // Each message as if it came alone; the batch is answered once, when
    // the last one has its outcome.
    if (!presettled) {
        link_ctx::batch_outcome& out = lc.batches[d];
        out.left = static_cast<uint32_t>(records.size());
        const pn_delivery_tag_t tag = pn_delivery_tag(d);
        if (tag.size == sizeof out.number) std::memcpy(&out.number, tag.start, sizeof out.number);
    }
    for (uint32_t i = 0; i < records.size(); ++i) {
        const relay::record& r = records[i];
        engine::incoming_message m;
        const bool too_big = r.bytes.size() > max;
        auto err = admit(too_big ? engine::message_ref{} : engine::message_ref::copy_of(r.bytes), too_big,
                         r.settled, m);
        if (err) {
            if (!presettled) {
                outcome_in_batch(lc, d, i, &*err);
                continue;
            }
            pn_delivery_settle(d);
            refuse_presettled(lc, *err); // ends the link: the rest of the batch goes with it
            return;
        }
        mark_dirty(lc);
        lc.to_publish.push_back(std::move(m));
        lc.awaiting.push_back({presettled ? nullptr : d, i});
    }
    if (presettled) pn_delivery_settle(d);
    top_up_credit(lc);
}

// A relay's batch producer: its credit in messages goes as a control record
// (send_credit_records), refilled at three quarters of the window (two
// hops to go round: more of it is on its way at any time). Proton's credit
// counts deliveries: at least one for each message the relay may still
// send, so it never holds up a batch, and never more than the window.
void amqp_connection::top_up_batch_credit(link_ctx& lc) {
    const auto credit = static_cast<int64_t>(lc.batch_limit - lc.batch_in); // < 0 if the relay sent too much
    if (!lc.blocked) {
        const int64_t window = producer_window();
        if (const int64_t add = refill(credit, window, window * 3 / 4); add > 0) {
            lc.batch_limit += static_cast<uint64_t>(add);
            relay::append_control(credits_out_, {relay::control::credit, lc.relay_link, lc.batch_limit, 0});
        }
    }
    const int64_t deliveries = static_cast<int64_t>(lc.batch_limit - lc.batch_in) - pn_link_credit(lc.link);
    if (deliveries > 0) pn_link_flow(lc.link, static_cast<int>(deliveries));
}

// The credit records the batch gathered, to the relay as one pre-settled
// delivery (Proton holds it until the relay's credit for the link allows).
void amqp_connection::send_credit_records() {
    if (credits_out_.empty()) return;
    link_ctx* lc = find(credits_link_);
    if (lc != nullptr && !lc->closed && lc->link != nullptr) {
        const uint64_t tag = lc->next_tag++;
        pn_delivery_t* d = pn_delivery(lc->link, pn_dtag(reinterpret_cast<const char*>(&tag), sizeof tag));
        pn_link_send(lc->link, credits_out_.data(), credits_out_.size());
        pn_link_advance(lc->link);
        pn_delivery_settle(d);
    }
    credits_out_.clear();
}

void amqp_connection::outcome_in_batch(link_ctx& lc, pn_delivery_t* d, uint32_t index, const error* failed) {
    auto it = lc.batches.find(d);
    if (it == lc.batches.end()) return;
    link_ctx::batch_outcome& out = it->second;
    if (failed != nullptr) out.failures.push_back({index, std::string(to_condition(failed->code)), failed->description});
    ++out.answered; // in order: a link's messages are answered in the order they came
    if (--out.left > 0) {
        if (lc.blocked) tell_accepted_prefixes(lc);
        return;
    }
    if (out.failures.empty()) {
        pn_delivery_update(d, PN_ACCEPTED);
    } else {
        relay::put_failures(pn_disposition_condition(pn_delivery_local(d)), out.failures);
        pn_delivery_update(d, PN_REJECTED);
    }
    pn_delivery_settle(d);
    lc.batches.erase(it);
}

void amqp_connection::tell_accepted_prefixes(link_ctx& lc) {
    if (!lc.prefix_answers) return;
    for (auto& [d, out] : lc.batches) {
        // Only a prefix with no refusal in it: a batch with one is answered whole.
        if (out.number == 0 || !out.failures.empty() || out.answered <= out.told || out.left == 0) continue;
        out.told = out.answered;
        relay::append_control(credits_out_, {relay::control::accepted, lc.relay_link, out.number,
                                             static_cast<uint8_t>(out.told)});
    }
}

// ---- a relayed consumer's messages, in batches ----

// The delivery the next records go into (a new one if none is open).
void amqp_connection::open_out_batch(link_ctx& lc) {
    if (lc.out != nullptr) return;
    const uint64_t t = lc.next_tag++;
    lc.out = pn_delivery(lc.link, pn_dtag(reinterpret_cast<const char*>(&t), sizeof t));
    mark_dirty(lc); // flush_link ends it at the event batch's end
}

void amqp_connection::batch_deliver(link_ctx& lc, engine::ev_deliver& ev) {
    pn_link_t* l = lc.link;
    const std::string_view bytes = wire_bytes(ev);
    if (lc.out != nullptr && (lc.out_count >= lc.batch || lc.out_bytes + bytes.size() > relay::max_batch_bytes))
        end_out_batch(lc);
    open_out_batch(lc);
    char head[relay::delivery_header];
    relay::put_delivery_header(head, ev.settle_on_send ? relay::presettled : 0, ev.seq, bytes.size());
    pn_link_send(l, head, sizeof head);
    pn_link_send(l, bytes.data(), bytes.size());
    ++lc.out_count;
    lc.out_bytes += sizeof head + bytes.size();
    ++lc.sent;
    // A relay from before presettled acks never answers for it: gone now.
    if (ev.settle_on_send && !ev.copy && !lc.presettled_acks) settle_sent(lc, ev.seq);
}

// The drain is done: the relay learns it after the messages before it.
void amqp_connection::batch_drained(link_ctx& lc) {
    open_out_batch(lc);
    char head[relay::delivery_header];
    relay::put_delivery_header(head, relay::drained, 0, 0);
    pn_link_send(lc.link, head, sizeof head);
    end_out_batch(lc);
}

// The batch being filled goes, pre-settled: its messages' outcomes come as
// control records (on_controls). Proton holds it until the relay's credit
// for deliveries allows.
void amqp_connection::end_out_batch(link_ctx& lc) {
    pn_link_advance(lc.link);
    pn_delivery_settle(lc.out);
    lc.out = nullptr;
    lc.out_count = 0;
    lc.out_bytes = 0;
}

// A peer's relay: credit, drain and outcomes for the consumers it relays.
void amqp_connection::on_controls(link_ctx& lc, pn_delivery_t* d) {
    std::string bytes;
    if (lc.link == nullptr || !take_whole(d, bytes)) return;
    std::vector<relay::control> controls;
    if (!relay::parse_controls(bytes, controls)) {
        if (pn_delivery_settled(d)) pn_delivery_settle(d);
        else reject_now(d, errc::decode_error, "relay control records are malformed");
        top_up_credit(lc);
        return;
    }
    for (const relay::control& c : controls) {
        auto it = relay_links_.find(c.link);
        link_ctx* to = it == relay_links_.end() ? nullptr : find(it->second);
        if (to == nullptr || to->closed) continue; // its messages went back with the detach
        if (c.what == relay::control::credit) {
            commands_.push_back(engine::cmd_credit{to->id, c.value, c.arg != 0});
        } else if (c.what != relay::control::accepted && c.arg <= static_cast<uint8_t>(engine::outcome_kind::too_large)) {
            mark_dirty(*to);
            to->to_settle.push_back({c.value, static_cast<engine::outcome_kind>(c.arg)});
            // (The relay checked the map; one that is not valid goes unused.)
            if (c.what == relay::control::annotated && !amqp::check_annotations(c.annotations))
                to->annotations.push_back({c.value, std::string(c.annotations)});
        }
    }
    // Settled once taken: the relay holds a detach of these links until then.
    // The settlement waits for end_batch, so that its frame goes out in the
    // same write as the messages and outcomes the batch's engine run makes
    // (answered here, it would be written alone as soon as the batch ran
    // out of events: one more write here, one more read at the relay).
    controls_taken_.push_back({lc.id, d});
    top_up_credit(lc);
}

// What on_controls took this batch: settled, after their commands were posted.
void amqp_connection::settle_controls() {
    for (const auto& [id, d] : controls_taken_) {
        link_ctx* lc = find(id);
        if (lc == nullptr || lc->link == nullptr) continue; // freed with its link
        pn_delivery_update(d, PN_ACCEPTED);
        pn_delivery_settle(d);
    }
    controls_taken_.clear();
}

} // namespace wharf::server
