// amqp_connection: the client's side of relayed links. The queue lives at
// another node; a twin link on a peer connection to it (peer_connection)
// does the work, and this side mirrors what crosses: the attach (opened here
// only once the owner opened its side), credit and drain, transfers with
// their tags, settled flags and bytes, dispositions both ways, and detaches
// with their conditions. No credit is granted here beyond what the other
// end gave, and an outcome reaches the producer only once the owner gave it.

#include "broker/amqp/annotations.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"
#include "broker/server/relay_hub.hpp"

#include <proton/disposition.h>
#include <spdlog/spdlog.h>

namespace wharf::server {

namespace {
std::string tag_of(pn_delivery_t* d) {
    pn_delivery_tag_t t = pn_delivery_tag(d);
    return std::string(t.start, t.size);
}
} // namespace

void amqp_connection::relay_attach(link_ctx& lc, const plugins::resolution& r) {
    std::shared_ptr<relay::mailbox> peer =
        settings_.relays ? settings_.relays->peer(r.node_id, r.host, r.port, serial_) : nullptr;
    if (!peer) {
        refuse_link(lc, error{errc::internal_error, "queue '" + lc.address + "' is on node " + r.node_id +
                                                        ", which this node cannot relay to"},
                    nullptr);
        return;
    }
    pn_link_t* l = lc.link;
    lc.pending_attach.reset();
    lc.relayed = true;
    mark_info(lc);
    lc.relay = peer;
    relay::message m;
    m.what = relay::message::kind::attach;
    m.relay = lc.id;
    relay::details& a = m.x();
    a.name = pn_link_name(l);
    a.client_sends = !lc.consumer;
    a.source = relay::capture(pn_link_remote_source(l));
    a.target = relay::capture(pn_link_remote_target(l));
    relay::terminus& at = lc.consumer ? a.source : a.target;
    if (!r.address.empty()) {
        at.address = r.address;
        at.has_address = true;
    }
    a.snd_settle_mode = pn_link_remote_snd_settle_mode(l);
    a.rcv_settle_mode = pn_link_remote_rcv_settle_mode(l);
    a.reply = relay_inbox_;
    if (!peer->post(std::move(m))) { // at once: its answer says whether the peer is there
        lc.relayed = false;
        refuse_link(lc, error{errc::detach_forced, "the connection to node " + r.node_id + " just closed; attach again"},
                    nullptr);
    }
}

// Credit the client gave a consumer link, as an absolute limit.
void amqp_connection::relay_flow(link_ctx& lc) {
    if (!lc.attached || lc.link == nullptr || !lc.new_credit()) return;
    relay::message m;
    m.what = relay::message::kind::flow;
    m.relay = lc.id;
    m.limit = lc.credit_said;
    m.drain = lc.drain_said;
    relay_out_.add(lc.relay, std::move(m));
}

// Credit for the client of a relayed producer: up to what the owner allows,
// but at most the link's share of the node's relay budget
// (relay_hub::producer_window) and, like a local producer's, of the client
// connection's credit pool (producer_credit.cpp), granted once half of that
// is used. Without the pool, 10,000 relayed producers held 20 each (the
// budget's floor): 200,000 messages in flight through the relaying node.
void amqp_connection::relay_credit(link_ctx& lc) {
    if (!lc.attached || lc.closed || lc.link == nullptr || settings_.relays == nullptr) return;
    // The owner's limit caps it: the client may send, in all, what it sent
    // plus its credit.
    const int64_t credit = std::max(0, pn_link_credit(lc.link));
    if (lc.pool.joined) {
        size_pool();
        pool_.holds(lc.pool, credit);
    }
    auto window = static_cast<int64_t>(settings_.relays->producer_window());
    if (lc.pool.joined) window = pool_.window(window);
    const uint64_t granted = lc.relay_in + static_cast<uint64_t>(credit);
    const auto room = static_cast<int64_t>(
        std::min<uint64_t>(lc.relay_limit > granted ? lc.relay_limit - granted : 0, INT32_MAX));
    int64_t add = refill(credit, window, window / 2, room);
    if (lc.pool.joined) add = pool_.grant(lc.pool, lc.id, add, pool_turn_ == lc.id);
    if (add > 0) pn_link_flow(lc.link, static_cast<int>(add));
}

// A transfer from a producer on a relayed link: pass it on whole. Its
// frames are gathered here as they come, so that one larger than this
// node's max-message-size (which the attach advertised, and Proton does not
// enforce) is counted and dropped on the way instead of held whole.
void amqp_connection::relay_incoming(link_ctx& lc, pn_delivery_t* d) {
    pn_link_t* l = lc.link;
    if (l == nullptr || !pn_delivery_readable(d)) return;
    if (pn_delivery_aborted(d)) {
        // The client spent a credit on it (the settle advances the link)
        // and nothing goes to the owner, whose limit counts only what
        // relay_in counts: the client gets the credit back within that limit.
        lc.partial.clear();
        lc.oversize = false;
        pn_delivery_settle(d);
        relay_credit(lc);
        return;
    }
    const uint64_t max = settings_.max_message_size;
    if (!gather(lc, d, max)) return;
    pn_link_advance(l);
    if (lc.oversize) {
        // Refused here, as at the owner; like an abort, its credit comes back.
        lc.oversize = false;
        const error big{errc::message_size_exceeded,
                        "message is larger than this link's max-message-size of " + std::to_string(max) + " bytes"};
        if (!pn_delivery_settled(d)) {
            reject_now(d, big.code, big.description);
            relay_credit(lc);
        } else {
            pn_delivery_settle(d);
            refuse_presettled(lc, big); // ends the link
        }
        return;
    }
    relay::message m;
    m.what = relay::message::kind::transfer;
    m.relay = lc.id;
    m.tag = tag_of(d);
    m.bytes = std::move(lc.partial);
    lc.partial = {};
    m.settled = pn_delivery_settled(d);
    m.id = ++lc.relay_ids;
    ++lc.relay_in;
    if (m.settled) pn_delivery_settle(d);
    else lc.relay_unsettled[m.id] = d;
    relay_out_.add(lc.relay, std::move(m));
    relay_credit(lc);
}

// The client's outcome or settlement of a delivery from the owner.
void amqp_connection::relay_disposition(link_ctx& lc, pn_delivery_t* d) {
    if (!pn_delivery_updated(d) && !pn_delivery_settled(d)) return;
    relay::message m;
    m.what = relay::message::kind::disposition;
    m.relay = lc.id;
    m.id = relay::id_of(d);
    relay::capture_state(m, d);
    // Annotations the owner would refuse end the link here, as there.
    std::optional<amqp::codec_error> bad;
    if (m.more && !m.more->st.annotations.empty()) {
        bad = amqp::check_annotations(m.more->st.annotations);
        if (bad) m.more->st.annotations.clear();
    }
    m.settled = pn_delivery_settled(d);
    pn_delivery_clear(d);
    // A terminal outcome settles it here, as at the owner (a client in
    // rcv-settle-mode second waits for that).
    const bool terminal = m.state >= PN_ACCEPTED && m.state <= PN_MODIFIED;
    if (m.settled || terminal) pn_delivery_settle(d);
    relay_out_.add(lc.relay, std::move(m));
    if (bad) end_for_bad_annotations(lc, *bad);
}

// A message from the owner to the client. One the owner sent pre-settled
// (at-most-once) it holds until the relay says it was sent: the relay
// passes it to Proton only within the client's credit (else it waits in
// relay_held), so that it never sits in Proton's buffer when the link ends.
void amqp_connection::relay_send(link_ctx& lc, relay::message& m) {
    relay::send(lc.link, m);
    ++lc.sent;
    if (m.settled && lc.owner_acks) relay_back(lc, m.id, engine::outcome_kind::accepted);
}

void amqp_connection::relay_send_held(link_ctx& lc) {
    if (foreign_delivery(lc)) return; // what it held is answered unsent at the detach
    while (!lc.relay_held.empty() && pn_link_credit(lc.link) > 0) {
        relay_send(lc, lc.relay_held.front());
        lc.relay_held.pop_front();
    }
}

// Tells the owner that a message the client never settles itself left
// (accepted: sent pre-settled) or goes back to the queue, never sent
// (unsent, too_large). An owner from before these answers ignores them (it
// let a pre-settled message go when it sent it).
void amqp_connection::relay_back(link_ctx& lc, uint64_t id, engine::outcome_kind outcome) {
    relay::message m;
    m.what = relay::message::kind::disposition;
    m.relay = lc.id;
    m.id = id;
    m.settled = true;
    if (outcome == engine::outcome_kind::accepted) m.state = PN_ACCEPTED;
    else m.back = static_cast<uint8_t>(outcome);
    relay_out_.add(lc.relay, std::move(m));
}

// The client ended the link (or its connection): end the twin too; the
// owner returns what the client held unsettled to the queue, and what the
// relay held for it here (relay_back, before the detach).
void amqp_connection::relay_detach(link_ctx& lc, bool closed) {
    if (lc.closed) return;
    mark_closed(lc);
    lc.producer_share.release();
    relay_bye(lc, closed, lc.link != nullptr ? relay::capture(pn_link_remote_condition(lc.link)) : relay::condition{});
    lc.relay_unsettled.clear();
}

// This side's detach to the twin, after answering for what it held for the
// client: never sent, back to the owner's queue.
void amqp_connection::relay_bye(link_ctx& lc, bool closed, relay::condition cond) {
    for (const relay::message& held : lc.relay_held) relay_back(lc, held.id, engine::outcome_kind::unsent);
    lc.relay_held.clear();
    relay::message m;
    m.what = relay::message::kind::detach;
    m.relay = lc.id;
    m.closed = closed;
    if (cond.set()) m.x().cond = std::move(cond);
    relay_out_.add(lc.relay, std::move(m));
}

// The twin ended: end the client's link with the owner's condition. What the
// producer sent that the owner never settled is settled modified
// (delivery-failed) so that the client sends it again. An owner that takes
// the relay's answers hears that what waited here for the client's credit
// was never sent, then this side's detach, which the twin waits for (see
// peer_connection::on_remote_close).
void amqp_connection::relay_ended(link_ctx& lc, const relay::condition& cond, bool closed) {
    if (lc.closed || lc.link == nullptr) return;
    mark_closed(lc);
    lc.producer_share.release();
    if (lc.owner_acks) relay_bye(lc, closed, {});
    lc.relay_held.clear();
    for (auto& [id, d] : lc.relay_unsettled) { // (a producer's: consumers keep no map)
        pn_disposition_set_failed(pn_delivery_local(d), true);
        pn_delivery_update(d, PN_MODIFIED);
        pn_delivery_settle(d);
    }
    lc.relay_unsettled.clear();
    relay::apply(cond, pn_link_condition(lc.link), condition_max_);
    if (closed) pn_link_close(lc.link);
    else pn_link_detach(lc.link);
}

// ---- anonymous relay across nodes ---------------------------------------------

namespace {
// Settles what a twin never answered so that the producer sends it again.
void fail_unsettled(relay::unsettled_map& unsettled) {
    for (auto& [id, d] : unsettled) {
        pn_disposition_set_failed(pn_delivery_local(d), true);
        pn_delivery_update(d, PN_MODIFIED);
        pn_delivery_settle(d);
    }
    unsettled.clear();
}
} // namespace

void amqp_connection::relay_anonymous(link_ctx& lc, pn_delivery_t* d, const plugins::resolution& to,
                                      std::string bytes, bool presettled) {
    auto& twin = lc.anon_twins[to.node_id];
    if (!twin.peer) {
        twin.peer = settings_.relays ? settings_.relays->peer(to.node_id, to.host, to.port, serial_) : nullptr;
        twin.relay = link_ids_.fetch_add(1, std::memory_order_relaxed) + 1;
        if (twin.peer) {
            relay::message attach;
            attach.what = relay::message::kind::attach;
            attach.relay = twin.relay;
            relay::details& a = attach.x();
            a.name = std::string(pn_link_name(lc.link)) + "-to-" + to.node_id;
            a.client_sends = true;
            a.source = relay::capture(pn_link_remote_source(lc.link));
            a.target = relay::capture(pn_link_remote_target(lc.link)); // null: anonymous there too
            a.snd_settle_mode = pn_link_remote_snd_settle_mode(lc.link);
            a.rcv_settle_mode = pn_link_remote_rcv_settle_mode(lc.link);
            a.reply = relay_inbox_;
            if (twin.peer->post(std::move(attach))) anon_routes_[twin.relay] = {lc.id, to.node_id};
            else twin.peer.reset();
        }
    }
    // d is null when the producer pre-settled the message (it is settled
    // here already); the twin's transfer is pre-settled too.
    relay::message m;
    m.what = relay::message::kind::transfer;
    m.relay = twin.relay;
    m.id = ++lc.relay_ids;
    m.tag = d != nullptr ? tag_of(d) : "s" + std::to_string(m.id);
    const uint64_t id = m.id;
    m.bytes = std::move(bytes);
    m.settled = presettled || d == nullptr;
    const bool sent = twin.peer != nullptr;
    if (sent) {
        relay_out_.add(twin.peer, std::move(m));
        ++twin.sent;
    }
    if (!sent) {
        anon_routes_.erase(twin.relay);
        lc.anon_twins.erase(to.node_id);
        if (d != nullptr)
            reject_now(d, errc::detach_forced, "cannot reach node " + to.node_id + ", which owns the queue; send again");
        return;
    }
    if (d != nullptr) twin.unsettled[id] = d;
}

// A message for an anonymous twin; false if `m` is not for one.
bool amqp_connection::handle_anonymous(relay::message& m) {
    using kind = relay::message::kind;
    auto route = anon_routes_.find(m.relay);
    if (route == anon_routes_.end()) return false;
    link_ctx* lc = find(route->second.first);
    auto twin = lc ? lc->anon_twins.find(route->second.second) : decltype(lc->anon_twins.end()){};
    if (lc == nullptr || twin == lc->anon_twins.end() || twin->second.relay != m.relay) {
        anon_routes_.erase(route);
        return true;
    }
    switch (m.what) {
    case kind::disposition:
        relay::settle(m, twin->second.unsettled);
        break;
    case kind::refused:
    case kind::detach:
        spdlog::info("{}: anonymous relay to node {} ended: {} {}", settings_.node_id, route->second.second,
                     m.cond() ? m.cond()->name : "", m.cond() ? m.cond()->description : "");
        fail_unsettled(twin->second.unsettled);
        lc->anon_twins.erase(twin);
        anon_routes_.erase(route);
        top_up_credit(*lc); // what waited for that owner waits no more
        break;
    case kind::flow:
        // The producer's credit is this node's own window, but only while
        // every owner takes what was relayed to it (see anon_waiting).
        twin->second.limit = m.limit;
        top_up_credit(*lc);
        break;
    default:
        break; // attached
    }
    return true;
}

// An anonymous producer's messages that wait at this node: those whose
// address the cluster is placing, and the most relayed to one owner beyond
// what that owner has given credit for (they wait in the peer link).
uint64_t amqp_connection::anon_waiting(const link_ctx& lc) {
    uint64_t most = 0;
    for (const auto& [node, twin] : lc.anon_twins)
        most = std::max(most, twin.sent > twin.limit ? twin.sent - twin.limit : 0);
    return lc.anon_held.size() + most;
}

void amqp_connection::end_anon_twins(link_ctx& lc) {
    for (auto& [node, twin] : lc.anon_twins) {
        anon_routes_.erase(twin.relay);
        twin.unsettled.clear(); // the client's link is ending: its deliveries end with it
        if (!twin.peer) continue;
        relay::message bye;
        bye.what = relay::message::kind::detach;
        bye.relay = twin.relay;
        relay_out_.add(twin.peer, std::move(bye));
    }
    lc.anon_twins.clear();
}

void amqp_connection::handle(relay::message& m) {
    using kind = relay::message::kind;
    if (handle_anonymous(m)) return;
    link_ctx* lc = find(m.relay);
    const bool gone = lc == nullptr || lc->closed || lc->link == nullptr || !lc->relayed;
    if (gone) {
        // The client left while the owner answered: end the twin.
        if (m.what == kind::attached && lc != nullptr && lc->relay) {
            relay::message bye;
            bye.what = kind::detach;
            bye.relay = m.relay;
            relay_out_.add(lc->relay, std::move(bye));
        }
        return;
    }
    pn_link_t* l = lc->link;
    switch (m.what) {
    case kind::attached:
        if (m.more) {
            relay::apply(m.more->source, pn_link_source(l));
            relay::apply(m.more->target, pn_link_target(l));
            lc->owner_acks = m.more->owner_acks;
        }
        pn_link_open(l);
        lc->attached = true;
        if (lc->consumer) {
            relay_flow(*lc); // credit the client gave while the owner answered
        } else {
            lc->producer_share = credit_budget::share(settings_.relays->producers());
            join_pool(*lc);
            relay_credit(*lc);
        }
        break;
    case kind::refused: {
        mark_closed(*lc);
        pn_terminus_set_type(lc->consumer ? pn_link_source(l) : pn_link_target(l), PN_UNSPECIFIED);
        pn_link_open(l);
        if (m.cond()) relay::apply(*m.cond(), pn_link_condition(l), condition_max_);
        pn_link_close(l);
        break;
    }
    case kind::flow:
        // The owner's credit for a producer: the client may send up to it.
        lc->relay_limit = m.limit;
        relay_credit(*lc);
        break;
    case kind::transfer:
        // An owner from before the relay's answers (owner_acks false) let
        // pre-settled messages go as it sent them and ignores too_large:
        // pass everything on as it comes, as then.
        if (lc->owner_acks && lc->max_out != 0 && m.bytes.size() > lc->max_out) {
            // Larger than the client takes: back to the owner's queue, for
            // its other consumers (see send_delivery).
            relay_back(*lc, m.id, engine::outcome_kind::too_large);
            break;
        }
        if (pn_link_current(l) != nullptr) {
            // A delivery of the client's on it (transfer_checks.cpp): the
            // link ends, and the owner hears this one was never sent.
            if (lc->owner_acks && m.settled) lc->relay_held.push_back(std::move(m));
            foreign_delivery(*lc);
            break;
        }
        if (lc->owner_acks && m.settled && (pn_link_credit(l) <= 0 || !lc->relay_held.empty())) {
            lc->relay_held.push_back(std::move(m)); // until the client gives credit
            break;
        }
        relay_send(*lc, m);
        break;
    case kind::disposition:
        relay::settle(m, lc->relay_unsettled);
        break;
    case kind::drained:
        pn_link_drained(l);
        break;
    case kind::detach:
        relay_ended(*lc, m.cond() ? *m.cond() : relay::condition{}, m.closed);
        break;
    case kind::attach:
        break; // never sent to a client connection
    }
}

} // namespace wharf::server
