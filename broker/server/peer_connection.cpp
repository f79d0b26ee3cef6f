#include "broker/server/peer_connection.hpp"

#include "broker/server/busy_poll.hpp"
#include "broker/server/pn_util.hpp"
#include "broker/server/relay_batch.hpp"
#include "broker/server/relay_hub.hpp"

#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/transport.h>
#include <spdlog/spdlog.h>

namespace wharf::server {

namespace {
using kind = relay::message::kind;

std::string tag_of(pn_delivery_t* d) {
    pn_delivery_tag_t t = pn_delivery_tag(d);
    return std::string(t.start, t.size);
}

// The side of the twin that the owner answers for: the queue's end.
pn_terminus_t* queue_end(pn_link_t* l, bool client_sends) {
    return client_sends ? pn_link_remote_target(l) : pn_link_remote_source(l);
}
} // namespace

peer_connection::peer_connection(pn_connection_t* c, const std::string& own_node, std::string peer_node,
                                 relay_hub& hub)
    : conn_(c), peer_node_(std::move(peer_node)), hub_(hub), inbox_(std::make_shared<relay::mailbox>(c)) {
    bind_to(c);
    const std::string container = "wharf-" + own_node + "-relay";
    pn_connection_set_container(c, container.c_str());
    pn_connection_open(c);
}

peer_connection::~peer_connection() { inbox_->close(); }

void peer_connection::request_shutdown() {
    shutdown_requested_.store(true);
    wake_connection(conn_);
}

peer_connection::twin* peer_connection::find(uint64_t relay) {
    auto it = twins_.find(relay);
    return it == twins_.end() ? nullptr : it->second.get();
}

void peer_connection::tell(twin& t, relay::message&& m) {
    m.relay = t.relay;
    out_.add(t.reply.lock(), std::move(m));
}

// Attaches that were still waiting in the inbox when the connection ended:
// their clients hear why, like the twins' clients do.
void peer_connection::refuse_waiting(std::vector<relay::message>&& waiting, const std::string& why) {
    for (auto& m : waiting) {
        if (m.what != kind::attach || !m.more) continue;
        relay::message no;
        no.what = kind::refused;
        no.relay = m.relay;
        no.x().cond = {std::string(to_condition(errc::detach_forced)), why, {}};
        out_.add(m.more->reply.lock(), std::move(no));
    }
}

void peer_connection::on_event(pn_event_t* e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_CLOSE: {
        relay::condition c = relay::capture(pn_connection_remote_condition(conn_));
        end_all("node " + peer_node_ + " closed the connection" + (c.set() ? ": " + c.description : ""));
        pn_connection_close(conn_);
        break;
    }
    case PN_LINK_REMOTE_OPEN:
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH:
    case PN_LINK_FLOW: {
        pn_link_t* l = pn_event_link(e);
        void* ctx = pn_link_get_context(l);
        const auto type = pn_event_type(e);
        const bool remote_end = type == PN_LINK_REMOTE_CLOSE || type == PN_LINK_REMOTE_DETACH;
        if (ctx == &ended_here) {
            if (remote_end) { // the owner answered our detach: both ends are done
                pn_link_set_context(l, nullptr);
                free_link(l);
            }
            break;
        }
        if (ctx == &credits_ctx) {
            if (remote_end) on_credits_ended(l);
            break;
        }
        if (ctx == &controls_ctx) {
            if (remote_end) { // the owner will not take controls: its batch consumers cannot go on
                const relay::condition c = relay::capture(pn_link_remote_condition(l));
                spdlog::warn("node {} ended the relay's control link: {} {}", peer_node_, c.name, c.description);
                pn_link_set_context(l, nullptr);
                controls_ = nullptr;
                end_all("node " + peer_node_ + " ended the relay's control link" +
                        (c.set() ? ": " + c.description : ""));
            }
            break;
        }
        auto* t = static_cast<twin*>(ctx);
        if (t == nullptr) break;
        if (type == PN_LINK_REMOTE_OPEN) on_remote_open(*t);
        else if (type == PN_LINK_FLOW) on_flow(*t);
        else on_remote_close(*t, type == PN_LINK_REMOTE_CLOSE);
        break;
    }
    case PN_DELIVERY: {
        pn_delivery_t* d = pn_event_delivery(e);
        void* ctx = pn_link_get_context(pn_delivery_link(d));
        if (ctx == &controls_ctx) on_control_settled(d);
        else if (ctx == &credits_ctx) on_credit_records(d);
        else if (ctx != nullptr && ctx != &ended_here) on_delivery(*static_cast<twin*>(ctx), d);
        break;
    }
    case PN_TRANSPORT_CLOSED: {
        relay::condition c = relay::capture(pn_transport_condition(pn_event_transport(e)));
        const std::string why =
            "the connection to node " + peer_node_ + " was lost" + (c.set() ? ": " + c.description : "");
        end_all(why);
        hub_.lost(inbox_.get());
        refuse_waiting(inbox_->close(), why);
        finished_ = true;
        out_.flush();
        break;
    }
    default:
        break;
    }
}

void peer_connection::end_batch() {
    if (!finished_) {
        if (shutdown_requested_.exchange(false)) {
            hub_.lost(inbox_.get());
            end_all("node is shutting down");
            pn_connection_close(conn_);
        } else {
            inbox_->take(msgs_);
            for (auto& m : msgs_) handle(m);
            msgs_.clear();
            for (uint64_t id : orphans_) end_orphan(id);
            orphans_.clear();
            // The consumers' outcomes before the producers' messages that
            // came after them: a client that accepts a message and then
            // sends one to the same full queue finds the room at the owner,
            // as it would connected there.
            send_controls();
            for (uint64_t id : to_send_)
                if (twin* t = find(id)) {
                    t->queued = false;
                    send_batches(*t);
                }
            to_send_.clear();
        }
    }
    out_.flush();
}

// Every twin ends: their clients' links are detached, saying why, and the
// twins too (when the connection goes on: one of the relay's own links
// ended), saying that their client sides' answers will not come: the owner
// counts what they left unanswered as sent (relay_batch.hpp), and a queue
// move there does not wait for them.
void peer_connection::end_all(const std::string& why) {
    for (auto& [id, t] : twins_) {
        relay::message m;
        m.what = t->opened ? kind::detach : kind::refused;
        m.x().cond = {std::string(to_condition(errc::detach_forced)), why, {}};
        tell(*t, std::move(m));
        pn_link_t* l = t->link;
        if (l == nullptr) continue;
        pn_condition_t* c = pn_link_condition(l);
        pn_condition_set_name(c, relay::answers_lost_condition);
        pn_condition_set_description(c, why.c_str());
        pn_link_close(l);
        if (t->remote_ended) {
            pn_link_set_context(l, nullptr);
            free_link(l);
        } else {
            pn_link_set_context(l, &ended_here); // freed when the owner answers
        }
    }
    twins_.clear();
    held_detaches_.clear(); // their clients were told above, with the others
}

void peer_connection::handle(relay::message& m) {
    if (m.what == kind::attach) return attach(m);
    twin* t = find(m.relay);
    if (t == nullptr || t->link == nullptr) return;
    pn_link_t* l = t->link;
    switch (m.what) {
    case kind::flow: {
        if (t->batch != 0) { // (the client receives) its credit in messages, as a control record
            add_control({relay::control::credit, t->relay, m.limit, static_cast<uint8_t>(m.drain)});
            break;
        }
        // The client's credit, as an absolute limit over the link's life.
        const int64_t want = static_cast<int64_t>(m.limit) - static_cast<int64_t>(t->transfers);
        const int64_t have = pn_link_credit(l);
        const int more = static_cast<int>(std::max<int64_t>(0, want - have));
        if (m.drain) {
            t->drain_asked = true;
            pn_link_drain(l, more);
        } else {
            if (pn_link_get_drain(l)) pn_link_set_drain(l, false);
            if (more > 0) pn_link_flow(l, more);
        }
        break;
    }
    case kind::transfer:
        if (t->batch != 0) { // sent at the batch's end, with the others
            t->pending.push_back(std::move(m));
            if (!t->queued) to_send_.push_back(t->relay);
            t->queued = true;
            break;
        }
        relay::send(l, m);
        ++t->transfers;
        break;
    case kind::disposition:
        if (t->batch != 0 && !t->client_sends) {
            const bool failed = m.more && m.more->st.failed, undeliverable = m.more && m.more->st.undeliverable;
            if (m.back != 0)
                add_control({relay::control::outcome, t->relay, m.id, m.back});
            else if (auto outcome = relay::outcome_for(m.state, failed, undeliverable, m.settled)) {
                const bool annotated = t->annotated_outcomes && m.more && !m.more->st.annotations.empty();
                add_control({annotated ? relay::control::annotated : relay::control::outcome, t->relay, m.id,
                             static_cast<uint8_t>(*outcome), annotated ? m.more->st.annotations : std::string_view{}});
            }
            break;
        }
        relay::settle(m, t->unsettled);
        break;
    case kind::detach:
        if (t->batch != 0 && !t->client_sends) {
            // Its outcomes go first, and the owner takes them before the
            // detach, which hands back whatever is still out.
            send_controls();
            if (controls_settled_ < controls_sent_) {
                held_detaches_.emplace_back(controls_sent_, std::move(m));
                break;
            }
        }
        detach_twin(*t, m);
        break;
    default:
        break;
    }
}

// Its answers, if its client's side sent any, went out with its detach; if
// it sent none, what the owner passed on may have reached the client: the
// owner counts it as sent (never twice).
void peer_connection::end_orphan(uint64_t relay) {
    twin* t = find(relay);
    if (t == nullptr) return; // its detach came
    for (const auto& held : held_detaches_)
        if (held.second.relay == relay) return; // it comes once the owner took the answers
    relay::message m;
    m.relay = relay;
    m.what = kind::detach;
    m.closed = t->remote_closed;
    m.x().cond = {relay::answers_lost_condition, "the client's connection ended before it answered", {}};
    detach_twin(*t, m);
}

void peer_connection::detach_twin(twin& t, const relay::message& m) {
    pn_link_t* l = t.link;
    // What the client sent before it detached and waits here for the
    // batch's end goes first (it had the owner's credit for all of it);
    // Proton writes a sender's detach only after its deliveries.
    if (t.client_sends && !t.pending.empty()) send_batches(t);
    if (m.cond()) relay::apply(*m.cond(), pn_link_condition(l));
    if (t.remote_ended) { // the owner ended it first, and waited for this
        pn_link_set_context(l, nullptr);
        if (t.remote_closed) pn_link_close(l);
        else pn_link_detach(l);
        free_link(l);
        twins_.erase(t.relay); // t is gone
        return;
    }
    pn_link_set_context(l, &ended_here); // freed when the owner answers
    if (m.closed) pn_link_close(l);
    else pn_link_detach(l);
    twins_.erase(t.relay); // t is gone
}

void peer_connection::attach(relay::message& m) {
    if (!m.more) return;
    const relay::details& a = *m.more;
    const bool producer_batches = a.client_sends && !a.target.address.empty();
    if (producer_batches) open_credits(); // attached before the twin: the owner has it when it answers
    auto t = std::make_unique<twin>();
    t->relay = m.relay;
    t->reply = a.reply;
    t->client_sends = a.client_sends;
    const std::string name = "relay-" + std::to_string(m.relay) + "-" + a.name;
    pn_session_t* ssn = session_for_link();
    pn_link_t* l = a.client_sends ? pn_sender(ssn, name.c_str()) : pn_receiver(ssn, name.c_str());
    relay::apply(a.source, pn_link_source(l));
    relay::apply(a.target, pn_link_target(l));
    pn_link_set_snd_settle_mode(l, static_cast<pn_snd_settle_mode_t>(a.snd_settle_mode));
    pn_link_set_rcv_settle_mode(l, static_cast<pn_rcv_settle_mode_t>(a.rcv_settle_mode));
    if (producer_batches) relay::offer_batch(l, relay::max_batch, m.relay, credits_ != nullptr, {}, false, true);
    if (!a.client_sends && !a.source.address.empty() && !a.source.dynamic)
        relay::offer_batch(l, relay::max_batch, m.relay, false, relay::presettled_detach_value, true);
    t->link = l;
    pn_link_set_context(l, t.get());
    pn_link_open(l);
    twins_.emplace(m.relay, std::move(t));
}

pn_session_t* peer_connection::session_for_link() {
    if (session_ == nullptr || session_links_[session_] >= links_per_session) {
        session_ = pn_session(conn_);
        pn_session_open(session_);
    }
    ++session_links_[session_];
    return session_;
}

void peer_connection::free_link(pn_link_t* l) {
    pn_session_t* ssn = pn_link_session(l);
    pn_link_free(l);
    auto it = session_links_.find(ssn);
    if (it == session_links_.end() || --it->second > 0 || ssn == session_) return;
    session_links_.erase(it);
    pn_session_close(ssn);
    pn_session_free(ssn);
}

void peer_connection::on_remote_open(twin& t) {
    // A refusal comes as an attach with a null terminus, then a detach with
    // the reason: wait for the detach.
    if (pn_terminus_get_type(queue_end(t.link, t.client_sends)) == PN_UNSPECIFIED) return;
    relay::message m;
    m.what = kind::attached;
    t.batch = std::min(relay::batch_size(t.link), relay::max_batch);
    if (t.batch != 0 && t.client_sends) {
        // An owner from before credit records counts messages in Proton's
        // credit: one message a delivery keeps the two the same.
        t.credit_records = relay::credit_records(t.link);
        if (!t.credit_records) t.batch = 1;
    }
    if (t.batch != 0 && !t.client_sends) {
        // Batches from the owner: Proton's credit paces deliveries only.
        if (controls_ == nullptr) {
            controls_ = pn_sender(session_for_link(), "wharf-relay-controls");
            const std::string address(relay::acks_address);
            pn_terminus_set_address(pn_link_target(controls_), address.c_str());
            pn_link_set_context(controls_, &controls_ctx);
            pn_link_open(controls_);
        }
        pn_link_flow(t.link, relay::batch_link_deliveries);
        m.x().owner_acks = t.owner_acks = relay::presettled_acks(t.link);
        t.annotated_outcomes = relay::annotated_outcomes(t.link);
    }
    m.x().source = relay::capture(pn_link_remote_source(t.link));
    m.x().target = relay::capture(pn_link_remote_target(t.link));
    t.opened = true;
    tell(t, std::move(m));
    if (t.credit_records) tell_limit(t); // credit records that came first
}

void peer_connection::on_remote_close(twin& t, bool closed) {
    relay::message m;
    m.what = t.opened ? kind::detach : kind::refused;
    m.x().cond = relay::capture(pn_link_remote_condition(t.link));
    m.closed = closed;
    tell(t, std::move(m));
    if (t.owner_acks) {
        // The client's side answers for what it holds of the owner's
        // pre-settled messages (unsent: they go back to the queue), then
        // detaches; the owner reads the answers before this end's detach.
        // A client connection that is gone put its detach in the inbox
        // before it went, if it sent one: end_batch() looks.
        t.remote_ended = true;
        t.remote_closed = closed;
        if (t.reply.expired()) orphans_.push_back(t.relay);
        return;
    }
    pn_link_t* l = t.link;
    pn_link_set_context(l, nullptr);
    if (closed) pn_link_close(l);
    else pn_link_detach(l);
    free_link(l); // both ends are done (see amqp_connection::on_link_close)
    twins_.erase(t.relay); // t is gone
}

void peer_connection::on_flow(twin& t) {
    pn_link_t* l = t.link;
    if (t.client_sends) {
        // The owner's credit for our sender: the client may send as much.
        // Proton reports a flow after each transfer too, with the limit unchanged.
        if (t.batch != 0) send_batches(t); // what waited for credit goes now
        if (pn_link_get_drain(l)) pn_link_drained(l);
        tell_limit(t);
    } else if (t.drain_asked && pn_link_credit(l) == 0) {
        t.drain_asked = false;
        relay::message m;
        m.what = kind::drained;
        tell(t, std::move(m));
    }
}

void peer_connection::on_delivery(twin& t, pn_delivery_t* d) {
    pn_link_t* l = t.link;
    relay::message m;
    if (!t.client_sends && t.batch != 0) return on_consumer_batch(t, d);
    if (!t.client_sends) {
        // A message from the owner for the client.
        if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
        m.what = kind::transfer;
        m.tag = tag_of(d);
        m.id = ++t.next_id;
        m.bytes.resize(pn_delivery_pending(d));
        pn_link_recv(l, m.bytes.data(), m.bytes.size());
        pn_link_advance(l);
        m.settled = pn_delivery_settled(d);
        ++t.transfers;
        if (m.settled) pn_delivery_settle(d);
        else t.unsettled[m.id] = d;
        tell(t, std::move(m));
        return;
    }
    // The owner's outcome for a message the client sent.
    if (!pn_delivery_updated(d) && !pn_delivery_settled(d)) return;
    if (t.batch != 0) return on_batch_outcome(t, d);
    m.what = kind::disposition;
    m.id = relay::id_of(d);
    relay::capture_state(m, d);
    m.settled = pn_delivery_settled(d);
    pn_delivery_clear(d);
    if (m.settled) pn_delivery_settle(d);
    tell(t, std::move(m));
}

} // namespace wharf::server
