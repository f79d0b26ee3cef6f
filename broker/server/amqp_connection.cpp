#include "broker/server/amqp_connection.hpp"

#include "broker/server/busy_poll.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/netaddr.h>
#include <proton/session.h>
#include <proton/transport.h>

#include <chrono>
#include <utility>
#include <spdlog/spdlog.h>

namespace wharf::server {

amqp_connection::amqp_connection(pn_connection_t* c, const connection_settings& s,
                                 engine::queue_engine& engine, std::atomic<uint64_t>& link_ids)
    : conn_(c), settings_(s), engine_(engine), link_ids_(link_ids),
      outbox_(std::make_shared<connection_outbox>(c)), relay_inbox_(std::make_shared<relay::mailbox>(c)),
      pool_(s.connection_credit), serial_(link_ids.fetch_add(1, std::memory_order_relaxed) + 1) {
    bind_to(c);
    info_.id = serial_;
    info_.opened_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
}

void amqp_connection::request_close(std::string description) {
    {
        std::lock_guard l(info_mu_);
        close_reason_ = std::move(description);
    }
    request_shutdown();
}

connection_info amqp_connection::info() const {
    std::lock_guard l(info_mu_);
    connection_info out = info_;
    out.links.reserve(info_links_.size());
    for (const auto& [id, link] : info_links_) out.links.push_back(link);
    return out;
}

// Connection thread: management's copy of who is connected and their links,
// updated for what changed in this batch.
void amqp_connection::refresh_info() {
    std::string container, remote;
    if (info_stale_) {
        if (const char* c = pn_connection_remote_container(conn_)) container = c;
        if (pn_transport_t* t = pn_connection_transport(conn_)) {
            char buf[128];
            if (const pn_netaddr_t* a = pn_transport_remote_addr(t); a && pn_netaddr_str(a, buf, sizeof buf) >= 0)
                remote = buf;
        }
    }
    std::lock_guard l(info_mu_);
    if (std::exchange(info_stale_, false)) {
        info_.container = std::move(container);
        info_.remote = std::move(remote);
    }
    for (engine::link_id id : info_dirty_) {
        const link_ctx* lc = find(id);
        if (lc == nullptr || lc->closed || lc->link == nullptr) info_links_.erase(id);
        else info_links_[id] = {pn_link_name(lc->link), lc->address, !lc->consumer, lc->relayed};
    }
    info_dirty_.clear();
}

amqp_connection::~amqp_connection() {
    outbox_->close();
    relay_inbox_->close();
}

void amqp_connection::refuse(errc code, std::string description) {
    refused_ = true;
    refuse_code_ = code;
    refuse_description_ = std::move(description);
}

void amqp_connection::open_within(std::chrono::milliseconds within) {
    open_within_ = within;
    open_deadline_ = std::chrono::steady_clock::now() + within;
}

// At the tick, under the server's table lock (so conn_ is alive).
void amqp_connection::check_open_deadline() {
    if (opened_.load(std::memory_order_relaxed) || open_overdue_.load(std::memory_order_relaxed)) return;
    if (std::chrono::steady_clock::now() < open_deadline_) return;
    open_overdue_.store(true, std::memory_order_relaxed);
    wake_connection(conn_);
}

// Without an open there is nothing to send a close on (the client may not
// even have sent the protocol header): the transport is ended, with its
// condition set for the log, and the socket closed.
void amqp_connection::drop_unopened() {
    open_dropped_ = true;
    pn_transport_t* t = pn_connection_transport(conn_);
    if (t == nullptr) return;
    spdlog::info("{}: a connection sent no AMQP open within {} ms of connecting: dropped", settings_.node_id,
                 open_within_.count());
    set_condition(pn_transport_condition(t), errc::resource_limit_exceeded,
                  "no AMQP open within " + std::to_string(open_within_.count()) + " ms of connecting");
    pn_transport_close_tail(t);
    pn_transport_close_head(t);
}

bool amqp_connection::refuse_idle_timeout() {
    pn_transport_t* t = pn_connection_transport(conn_);
    const pn_millis_t theirs = t != nullptr ? pn_transport_get_remote_idle_timeout(t) : 0;
    if (theirs == 0 || theirs >= min_peer_idle_timeout_ms) return false;
    set_condition(pn_connection_condition(conn_), errc::invalid_field,
                  "idle-time-out " + std::to_string(theirs) + " ms is shorter than this node can keep (it would send " +
                      "a heartbeat every " + std::to_string(theirs / 2) + " ms): ask for at least " +
                      std::to_string(min_peer_idle_timeout_ms) + " ms, or 0 for none");
    pn_connection_close(conn_);
    return true;
}

void amqp_connection::request_shutdown() {
    shutdown_requested_.store(true, std::memory_order_release);
    // Safe from any thread until the connection is freed; the server holds its
    // table lock, and removes us from the table before freeing.
    wake_connection(conn_);
}

amqp_connection::link_ctx* amqp_connection::ctx_of(pn_link_t* l) {
    return static_cast<link_ctx*>(pn_link_get_context(l));
}

amqp_connection::link_ctx* amqp_connection::find(engine::link_id id) {
    auto it = links_.find(id);
    return it == links_.end() ? nullptr : it->second.get();
}

void amqp_connection::on_event(pn_event_t* e) {
    // What management shows changes with these: note the link before (it
    // may be gone after) and after (it may be new) the event is handled.
    pn_link_t* changed = nullptr;
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN:
        info_stale_ = true;
        break;
    case PN_LINK_REMOTE_OPEN:
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH:
    case PN_LINK_FINAL:
        changed = pn_event_link(e);
        if (const link_ctx* lc = ctx_of(changed)) mark_info(*lc);
        break;
    default:
        break;
    }
    handle_event(e);
    if (changed != nullptr)
        if (const link_ctx* lc = ctx_of(changed)) mark_info(*lc);
}

void amqp_connection::handle_event(pn_event_t* e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN: {
        opened_.store(true, std::memory_order_relaxed);
        if (pn_transport_t* t = pn_connection_transport(conn_))
            condition_max_ = condition_budget(pn_transport_get_remote_max_frame(t));
        pn_connection_set_container(conn_, settings_.node_id.c_str());
        pn_data_t* caps = pn_connection_offered_capabilities(conn_);
        pn_data_clear(caps);
        pn_data_put_array(caps, false, PN_SYMBOL);
        pn_data_enter(caps);
        pn_data_put_symbol(caps, pn_bytes(15, "ANONYMOUS-RELAY"));
        pn_data_exit(caps);
        pn_connection_open(conn_);
        if (!refused_ && refuse_idle_timeout()) {
            refused_ = true; // no session or link is taken
            break;
        }
        if (refused_) {
            set_condition(pn_connection_condition(conn_), refuse_code_, refuse_description_);
            pn_connection_close(conn_);
        }
        break;
    }
    case PN_CONNECTION_REMOTE_CLOSE:
        pn_connection_close(conn_);
        break;
    case PN_SESSION_REMOTE_OPEN:
        if (!refused_) pn_session_open(pn_event_session(e));
        break;
    case PN_SESSION_REMOTE_CLOSE: {
        // Ending a session detaches its links (AMQP 1.0 §2.7.7): release what
        // their consumers held, as on any detach.
        // Then free the session and its links, as on_link_close frees a link.
        pn_session_t* ssn = pn_event_session(e);
        for (pn_link_t* l = pn_link_head(conn_, 0); l != nullptr; l = pn_link_next(l, 0)) {
            if (pn_link_session(l) != ssn) continue;
            if (!(pn_link_state(l) & PN_LOCAL_CLOSED)) pn_link_close(l);
            forget_link(l);
        }
        pn_session_close(ssn);
        pn_session_free(ssn);
        break;
    }
    case PN_LINK_REMOTE_OPEN:
        if (!refused_) on_link_open(pn_event_link(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
        on_link_close(pn_event_link(e), true);
        break;
    case PN_LINK_REMOTE_DETACH:
        on_link_close(pn_event_link(e), false);
        break;
    case PN_LINK_FLOW:
        if (credit_countable(pn_event_link(e))) on_link_flow(pn_event_link(e));
        break;
    case PN_LINK_FINAL:
        forget_link(pn_event_link(e));
        break;
    case PN_DELIVERY: {
        pn_delivery_t* d = pn_event_delivery(e);
        link_ctx* lc = ctx_of(pn_delivery_link(d));
        if (lc == nullptr || !transfer_allowed(*lc, d)) break;
        if (lc->relayed) {
            if (lc->consumer) relay_disposition(*lc, d);
            else relay_incoming(*lc, d);
        } else if (lc->consumer) {
            on_disposition(*lc, d);
        } else {
            on_incoming(*lc, d);
        }
        break;
    }
    case PN_TRANSPORT_ERROR: {
        pn_condition_t* c = pn_transport_condition(pn_event_transport(e));
        spdlog::debug("connection {}: transport error {}: {}", settings_.node_id,
                      pn_condition_get_name(c) ? pn_condition_get_name(c) : "",
                      pn_condition_get_description(c) ? pn_condition_get_description(c) : "");
        break;
    }
    case PN_TRANSPORT_CLOSED:
        on_transport_closed();
        break;
    default:
        break;
    }
}

void amqp_connection::on_transport_closed() {
    for (auto& [id, lc] : links_)
        if (!lc->closed) detach_link(*lc);
    for (auto& [id, lc] : links_) {
        if (lc->link) pn_link_set_context(lc->link, nullptr);
        lc->link = nullptr;
    }
    end_batch();
    outbox_->close();
    deferred_events_.clear();
    relay_inbox_->close(); // what twins still said is moot: the links are gone
    finished_ = true;
    relay_out_.flush();
}

void amqp_connection::end_batch() {
    if (open_overdue_.load(std::memory_order_relaxed) && !opened_.load(std::memory_order_relaxed) &&
        !open_dropped_ && !finished_)
        drop_unopened();
    if (shutdown_requested_.load(std::memory_order_acquire) && !shutdown_done_ && !finished_) {
        shutdown_done_ = true;
        std::string why;
        {
            std::lock_guard l(info_mu_);
            why = close_reason_;
        }
        set_condition(pn_connection_condition(conn_), errc::connection_forced,
                      why.empty() ? "the node " + settings_.node_id + " is shutting down" : why);
        pn_connection_close(conn_);
    }
    if ((info_stale_ || !info_dirty_.empty()) && !finished_) refresh_info();
    outbox_->hold_wakes();
    for (engine::link_id id : dirty_links_)
        if (link_ctx* lc = find(id)) flush_link(*lc);
    dirty_links_.clear();
    if (!commands_.empty()) {
        engine_.post_reusing(commands_);
    }
    if (!controls_taken_.empty()) settle_controls();
    if (finished_) {
        outbox_->release_wakes();
        relay_out_.flush();
        return;
    }
    // What the nodes relaying this connection's links sent.
    relay_inbox_->take(relay_msgs_);
    for (auto& m : relay_msgs_) handle(m);
    relay_msgs_.clear();
    // Apply what the engine answered (at once, when it ran on this thread):
    // first what an earlier pass left for this one.
    const bool closing = (pn_connection_state(conn_) & PN_LOCAL_CLOSED) != 0;
    outcome_budget_ = closing || deferred_outcomes_ > max_deferred_outcomes ? UINT32_MAX : outcomes_per_turn;
    deferred_outcomes_ = 0;
    for (bool earlier = !deferred_events_.empty();; earlier = false) {
        if (earlier) events_.swap(deferred_events_);
        else outbox_->take(events_, resolutions_);
        if (events_.empty() && resolutions_.empty()) break;
        for (auto& r : resolutions_) handle(r);
        resolutions_.clear();
        handle_events();
        for (engine::link_id id : dirty_links_)
            if (link_ctx* lc = find(id)) flush_link(*lc);
        dirty_links_.clear();
        if (!deferred_events_.empty()) {
            if (!commands_.empty()) engine_.post_reusing(commands_);
            wake_connection(conn_); // the rest in the next batch, after this one's writes
            break;
        }
        if (commands_.empty()) {
            if (earlier) continue; // then what came since
            break;
        }
        engine_.post_reusing(commands_);
    }
    if (pool_.waiting() != 0 || pool_line_.load(std::memory_order_relaxed)) serve_credit_line();
    send_credit_records();
    outbox_->release_wakes();
    relay_out_.flush();
}

// events_ in order, while the pass's outcome budget lasts: a sync's answer
// for more outcomes than are left is settled in part, and the rest of it and
// every later event go to deferred_events_.
void amqp_connection::handle_events() {
    size_t i = 0;
    for (; i < events_.size(); ++i) {
        auto* published = std::get_if<engine::ev_published>(&events_[i]);
        if (published == nullptr || !published->after_sync) {
            std::visit([this](auto& x) { handle(x); }, events_[i]);
            continue;
        }
        if (published->count <= outcome_budget_) {
            outcome_budget_ -= published->count;
            handle(*published);
            continue;
        }
        engine::ev_published head{published->link, outcome_budget_, {}};
        std::vector<engine::publish_failure> rest;
        for (auto& f : published->failures) {
            if (f.index < head.count) {
                head.failures.push_back(std::move(f));
            } else {
                f.index -= head.count;
                rest.push_back(std::move(f));
            }
        }
        handle(head);
        published->count -= head.count;
        published->failures = std::move(rest);
        outcome_budget_ = 0;
        break;
    }
    for (size_t j = i; j < events_.size(); ++j) {
        if (const auto* p = std::get_if<engine::ev_published>(&events_[j])) deferred_outcomes_ += p->count;
        deferred_events_.push_back(std::move(events_[j]));
    }
    events_.clear();
}

// Moves a link's buffered publishes and settlements into the command batch.
void amqp_connection::flush_link(link_ctx& lc) {
    lc.dirty = false;
    if (lc.out != nullptr && lc.link != nullptr) end_out_batch(lc);
    if (!lc.to_publish.empty()) {
        // The next batch's vector starts at this one's size: grown from
        // empty it was reallocated and its messages moved log2(n) times.
        const size_t n = lc.to_publish.size();
        commands_.push_back(engine::cmd_publish{lc.id, std::move(lc.to_publish)});
        lc.to_publish = {};
        lc.to_publish.reserve(n);
    }
    if (!lc.to_settle.empty() || !lc.unsent.empty()) {
        engine::cmd_settle c{lc.id, std::move(lc.to_settle), std::nullopt, std::move(lc.annotations)};
        lc.to_settle.clear();
        lc.annotations.clear();
        if (!lc.unsent.empty()) {
            for (uint64_t seq : lc.unsent) c.settlements.push_back({seq, engine::outcome_kind::unsent});
            lc.unsent.clear();
            c.limit = lc.sent + (lc.link ? static_cast<uint64_t>(std::max(0, pn_link_credit(lc.link))) : 0);
        }
        commands_.push_back(std::move(c));
    }
}

} // namespace wharf::server
