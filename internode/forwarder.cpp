// forwarder: the public side, the proactor thread's loop and the
// connection-level events (open, close, time-outs, wakes).

#include "internode/forwarder_impl.hpp"

#include <proton/sasl.h>
#include <proton/transport.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace wharf::internode {

const char* to_string(forward_result r) {
    switch (r) {
    case forward_result::accepted: return "accepted";
    case forward_result::released: return "released";
    case forward_result::rejected: return "rejected";
    case forward_result::modified: return "modified";
    case forward_result::failed: return "failed";
    }
    return "?";
}

std::string condition_text(pn_condition_t* c, const std::string& fallback) {
    if (c == nullptr || !pn_condition_is_set(c)) return fallback;
    std::string text = pn_condition_get_name(c);
    const char* d = pn_condition_get_description(c);
    if (d != nullptr && *d != '\0') text += std::string(": ") + d;
    return text;
}

namespace {
const std::string closed_text = "forwarder closed";

// A container id for callers that give none: unique enough that two
// forwarders of one process never share one.
std::string default_container_id() {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof buf, "wharf-forwarder-%08x%08x", rd(), rd());
    return buf;
}
} // namespace

// ---- public side ----------------------------------------------------------

forwarder::forwarder(forwarder_options o) : impl_(std::make_unique<impl>(std::move(o))) {}
forwarder::~forwarder() = default;
void forwarder::send(const std::string& address, std::string bytes, forward_callback done) {
    impl_->send(address, std::move(bytes), std::move(done));
}
size_t forwarder::in_flight() const { return impl_->in_flight(); }
bool forwarder::broken() const { return impl_->broken(); }

forwarder::impl::impl(forwarder_options o)
    : opts_(std::move(o)), peer_(opts_.host + ":" + std::to_string(opts_.port)),
      proactor_(pn_proactor()) {
    const std::string container =
        opts_.container_id.empty() ? default_container_id() : opts_.container_id;
    conn_ = pn_connection();
    pn_connection_set_container(conn_, container.c_str());
    if (!opts_.host.empty()) pn_connection_set_hostname(conn_, opts_.host.c_str());
    // Our side offers SASL; the peer's server transport (wharfd: ANONYMOUS,
    // authentication not required) picks the mechanism.
    pn_transport_t* t = pn_transport();
    pn_sasl_allowed_mechs(pn_sasl(t), "ANONYMOUS");
    if (opts_.idle_timeout.count() > 0)
        pn_transport_set_idle_timeout(t, static_cast<pn_millis_t>(opts_.idle_timeout.count()));
    pn_connection_open(conn_); // goes out once the transport is connected

    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, opts_.host.c_str(), std::to_string(opts_.port).c_str());
    pn_proactor_set_timeout(proactor_, static_cast<pn_millis_t>(opts_.connect_timeout.count()));
    {
        std::lock_guard lock(mu_);
        wake_conn_ = conn_;
    }
    pn_proactor_connect2(proactor_, conn_, t, addr); // the proactor owns conn_ and t now
    thread_ = std::thread([this] { run(); });
}

forwarder::impl::~impl() {
    if (std::this_thread::get_id() == thread_.get_id()) {
        // Joining ourselves cannot end: a broken invariant, so say it loudly.
        std::fputs("wharf::internode::forwarder destroyed from its own done callback\n", stderr);
        std::abort();
    }
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        if (wake_conn_ != nullptr) pn_connection_wake(wake_conn_);
        else pn_proactor_interrupt(proactor_);
    }
    thread_.join();
    pn_proactor_free(proactor_);
}

void forwarder::impl::send(const std::string& address, std::string bytes, forward_callback done) {
    in_flight_.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock lock(mu_);
    if (sealed_) {
        // Only reachable by a thread racing the destructor (a caller bug):
        // the thread has gone, so the one safe way to keep "done exactly
        // once" is to call it here.
        lock.unlock();
        in_flight_.fetch_sub(1, std::memory_order_acq_rel);
        if (done) done({forward_result::failed, closed_text});
        return;
    }
    // One wake per non-empty inbox: the thread empties it on that wake.
    const bool wake = inbox_.empty();
    inbox_.push_back({address, std::move(bytes), std::move(done)});
    if (!wake) return;
    // pn_connection_wake is only safe while Proton has not freed the
    // connection; the thread clears wake_conn_ (under mu_) before it does.
    if (wake_conn_ != nullptr) pn_connection_wake(wake_conn_);
    else pn_proactor_interrupt(proactor_);
}

// ---- proactor thread ------------------------------------------------------

void forwarder::impl::run() {
    while (!finished()) {
        pn_event_batch_t* batch = pn_proactor_wait(proactor_);
        while (pn_event_t* e = pn_event_batch_next(batch)) handle(e);
        pn_proactor_done(proactor_, batch);
        deliver_reports(); // after done(): callbacks may send() again
    }
    final_drain();
}

void forwarder::impl::handle(pn_event_t* e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN:
        remote_open_ = true;
        if (!closing_) pn_proactor_cancel_timeout(proactor_); // the connect time-out
        break;
    case PN_CONNECTION_WAKE:
    case PN_PROACTOR_INTERRUPT: // a wake that came while there was no connection
        on_wake();
        break;
    case PN_CONNECTION_REMOTE_CLOSE:
        connection_ended(condition_text(pn_connection_remote_condition(conn_),
                                        "connection closed by " + peer_));
        if (!(pn_connection_state(conn_) & PN_LOCAL_CLOSED)) pn_connection_close(conn_);
        break;
    case PN_SESSION_REMOTE_CLOSE:
        on_session_remote_end(pn_event_session(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
        on_link_remote_end(pn_event_link(e), true);
        break;
    case PN_LINK_REMOTE_DETACH:
        on_link_remote_end(pn_event_link(e), false);
        break;
    case PN_LINK_FLOW:
        on_flow(pn_event_link(e));
        break;
    case PN_DELIVERY:
        on_delivery(pn_event_delivery(e));
        break;
    case PN_TRANSPORT_ERROR:
        connection_ended(condition_text(pn_transport_condition(pn_event_transport(e)),
                                        "transport error on the connection to " + peer_));
        break;
    case PN_TRANSPORT_CLOSED:
        connection_gone(pn_transport_condition(pn_event_transport(e)));
        break;
    case PN_PROACTOR_TIMEOUT:
        on_timeout();
        break;
    case PN_PROACTOR_INACTIVE:
        // Only now is the connection freed for good; leaving the loop before
        // this leaks it when pn_proactor_free runs (LeakSanitizer shows it).
        inactive_ = true;
        break;
    default:
        break;
    }
}

// The inbox has messages, or the destructor has begun.
void forwarder::impl::on_wake() {
    std::vector<pending_message> in;
    bool stop = false;
    {
        std::lock_guard lock(mu_);
        in.swap(inbox_);
        stop = stopping_;
    }
    stop_seen_ = stop_seen_ || stop;
    if (stop && !closing_ && conn_ != nullptr) begin_close();
    if (conn_ == nullptr || broken_.load(std::memory_order_acquire)) {
        for (auto& m : in) report(std::move(m.done), forward_result::failed, failure_);
        return;
    }
    for (auto& m : in) route(std::move(m));
}

// Not a connection event: connection objects are not touched here. The
// transport's closed event that follows the drop fails what is pending.
void forwarder::impl::on_timeout() {
    if (conn_ == nullptr) return;
    pn_condition_t* cond = pn_condition();
    if (closing_) {
        pn_condition_set_name(cond, "wharf:close-timeout");
        pn_condition_set_description(
            cond, (peer_ + " did not answer our close within " +
                   std::to_string(opts_.close_timeout.count()) + " ms").c_str());
    } else if (!remote_open_) {
        const std::string why = "no AMQP open from " + peer_ + " within " +
                                std::to_string(opts_.connect_timeout.count()) + " ms (connect-timeout)";
        if (failure_.empty()) failure_ = why;
        pn_condition_set_name(cond, "wharf:connect-timeout");
        pn_condition_set_description(cond, why.c_str());
    } else {
        pn_condition_free(cond);
        return; // a connect time-out that raced the peer's open
    }
    pn_proactor_disconnect(proactor_, cond);
    pn_condition_free(cond);
}

// The destructor has begun: fail what is pending, say goodbye, and bound the
// wait for the peer's answer. Nothing to say to a peer that never opened.
void forwarder::impl::begin_close() {
    closing_ = true;
    connection_ended(closed_text);
    if (remote_open_) {
        if (!(pn_connection_state(conn_) & PN_LOCAL_CLOSED)) pn_connection_close(conn_);
        pn_proactor_set_timeout(proactor_, static_cast<pn_millis_t>(opts_.close_timeout.count()));
    } else {
        // Drop the transport from inside this connection's batch.
        pn_transport_t* t = pn_connection_transport(conn_);
        pn_condition_t* cond = pn_transport_condition(t);
        pn_condition_set_name(cond, "wharf:forwarder-closed");
        pn_condition_set_description(cond, closed_text.c_str());
        pn_transport_close_tail(t);
        pn_transport_close_head(t);
    }
}

// The connection can no longer forward anything: from now on every pending
// and every new message fails with the first reason seen.
void forwarder::impl::connection_ended(const std::string& why) {
    if (failure_.empty()) failure_ = why;
    broken_.store(true, std::memory_order_release);
    fail_all_links(failure_);
    fail_inbox(failure_);
}

// PN_TRANSPORT_CLOSED: after this batch Proton frees the connection, so stop
// waking it (and take what send() queued meanwhile) in one step.
void forwarder::impl::connection_gone(pn_condition_t* transport_condition) {
    connection_ended(condition_text(transport_condition, "connection to " + peer_ + " closed"));
    std::vector<pending_message> in;
    bool stop = false;
    {
        std::lock_guard lock(mu_);
        wake_conn_ = nullptr;
        in.swap(inbox_);
        stop = stopping_;
    }
    for (auto& m : in) report(std::move(m.done), forward_result::failed, failure_);
    conn_ = nullptr;
    session_ = nullptr;
    pn_proactor_cancel_timeout(proactor_); // a connect or close time-out has nothing left to do
    stop_seen_ = stop_seen_ || stop;
}

void forwarder::impl::fail_inbox(const std::string& why) {
    std::vector<pending_message> in;
    {
        std::lock_guard lock(mu_);
        in.swap(inbox_);
    }
    for (auto& m : in) report(std::move(m.done), forward_result::failed, why);
}

// The loop has ended (destructor): fail whatever done callbacks sent meanwhile,
// until nothing more comes; then later sends cannot reach this thread.
void forwarder::impl::final_drain() {
    for (;;) {
        std::vector<pending_message> in;
        {
            std::lock_guard lock(mu_);
            if (inbox_.empty()) {
                sealed_ = true;
                return;
            }
            in.swap(inbox_);
        }
        for (auto& m : in) report(std::move(m.done), forward_result::failed, closed_text);
        deliver_reports();
    }
}

void forwarder::impl::report(forward_callback done, forward_result r, std::string description) {
    reports_.emplace_back(std::move(done), forward_outcome{r, std::move(description)});
}

// Calls the done callbacks of this batch, with no lock held. A callback that
// throws ends the process (noexcept): there is no one to hand the error to.
void forwarder::impl::deliver_reports() noexcept {
    if (reports_.empty()) return;
    auto batch = std::move(reports_);
    reports_.clear();
    for (auto& [done, outcome] : batch) {
        in_flight_.fetch_sub(1, std::memory_order_acq_rel);
        if (done) done(std::move(outcome));
    }
}

} // namespace wharf::internode
