#pragma once
// Internal to the test client: the container handler and link state, shared
// by test_client.cpp (the client) and test_links.cpp (senders, receivers).
// Runs on the container thread; state guarded by the client's mutex.

#include "broker/server/tests/test_client.hpp"

#include <proton/codec/map.hpp>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/target.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

#include <atomic>
#include <deque>
#include <map>

namespace wharf::server::test {

namespace client_detail {


// The C object behind a Proton C++ wrapper. Proton keeps pn_object()
// protected; a derived copy of the wrapper may call it on itself.
template <class Wrapper> struct pn_access : Wrapper {
    explicit pn_access(const Wrapper& w) : Wrapper(w) {}
    auto get() const { return this->pn_object(); }
};
inline pn_delivery_t* pn_of(const proton::transfer& t) { return pn_access<proton::transfer>(t).get(); }
inline pn_link_t* pn_of(const proton::link& l) { return pn_access<proton::link>(l).get(); }

inline std::optional<amqp_error> to_error(const proton::error_condition& c) {
    if (c.empty()) return std::nullopt;
    return amqp_error{c.name(), c.description()};
}

inline std::optional<amqp_error> to_error(pn_condition_t* c) {
    if (c == nullptr || !pn_condition_is_set(c)) return std::nullopt;
    const char* n = pn_condition_get_name(c);
    const char* d = pn_condition_get_description(c);
    return amqp_error{n ? n : "", d ? d : ""};
}

} // namespace client_detail
using client_detail::pn_of;
using client_detail::to_error;

struct test_client::link_state {
    bool is_sender = false;
    proton::sender sender;       // container thread only
    proton::receiver receiver;   // container thread only
    bool opened = false;
    bool closed = false;
    std::optional<amqp_error> error;
    std::string remote_address;
    std::vector<std::string> remote_filters; // a receiver's: the keys of the answer's source filter
    uint64_t remote_max_message_size = 0;
    // sender
    std::deque<proton::message> pending;
    std::vector<proton::tracker> trackers; // container thread only
    std::vector<outcome> outcomes;         // one per sent message
    size_t queued = 0;
    pn_delivery_t* unfinished = nullptr;   // container thread only: begin_unfinished()
    // receiver
    std::vector<received_message> messages;
    std::vector<proton::delivery> deliveries; // container thread only
    std::vector<bool> settled;
    int drain_finished = 0;
    int drain_credit = -1;
};

// The container's handler: records everything under the client's mutex.
// Runs on the container thread.
class test_client::handler : public proton::messaging_handler {
  public:
    handler(test_client& owner, std::string address, proton::connection_options copts)
        : owner_(owner), address_(std::move(address)), copts_(std::move(copts)) {}

    // --- state, guarded by owner_.mu_ ---
    bool started = false;
    bool ended = false; // container.run() returned
    bool opened = false;
    bool closed = false;
    std::optional<amqp_error> error;
    std::vector<std::string> offered_caps;
    std::string remote_container;
    std::map<int, link_state> links;
    std::map<pn_link_t*, int> link_ids;
    std::map<pn_delivery_t*, std::pair<int, size_t>> trackers;
    int next_link = 1;
    proton::work_queue* wq = nullptr;

    proton::container container{*this};
    proton::connection conn; // container thread only

    void notify() { owner_.cv_.notify_all(); }

    link_state* find(const proton::link& l) {
        auto it = link_ids.find(pn_of(l));
        return it == link_ids.end() ? nullptr : &links[it->second];
    }

    // Sends queued messages while there is credit. Holds mu_.
    void pump(link_state& ls) {
        if (!ls.is_sender || ls.closed) return;
        while (!ls.pending.empty() && ls.sender.credit() > 0) {
            proton::tracker t = ls.sender.send(ls.pending.front());
            ls.pending.pop_front();
            const size_t index = ls.trackers.size();
            ls.trackers.push_back(t);
            ls.outcomes.push_back({});
            trackers[pn_of(t)] = {link_ids[pn_of(ls.sender)], index};
        }
    }

    void on_container_start(proton::container& c) override {
        std::lock_guard lock(owner_.mu_);
        conn = c.connect(address_, copts_);
        wq = &conn.work_queue();
        started = true;
        notify();
    }
    void on_container_stop(proton::container&) override {}

    void on_connection_open(proton::connection& c) override {
        std::lock_guard lock(owner_.mu_);
        opened = true;
        offered_caps.clear();
        for (const auto& s : c.offered_capabilities()) offered_caps.push_back(s);
        remote_container = c.container_id();
        notify();
    }
    void on_connection_error(proton::connection& c) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(c.error());
        notify();
    }
    void on_connection_close(proton::connection&) override {
        std::lock_guard lock(owner_.mu_);
        closed = true;
        notify();
    }
    void on_transport_error(proton::transport& t) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(t.error());
        closed = true;
        notify();
    }
    void on_transport_close(proton::transport&) override {
        std::lock_guard lock(owner_.mu_);
        closed = true;
        for (auto& [id, ls] : links) ls.closed = true;
        notify();
    }
    void on_session_error(proton::session& s) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(s.error());
        notify();
    }
    void on_error(const proton::error_condition& c) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(c);
        notify();
    }

    void on_sender_open(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) {
            ls->opened = true;
            ls->remote_address = s.target().address();
            ls->remote_max_message_size = pn_link_remote_max_message_size(pn_of(s));
            pump(*ls);
        }
        notify();
    }
    void on_sendable(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) pump(*ls);
        notify();
    }
    // Senders and receivers record errors and closes the same way.
    void link_error(const proton::link& l) {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(l)) ls->error = to_error(l.error());
        notify();
    }
    void link_closed(const proton::link& l) {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(l)) {
            ls->closed = true;
            if (!ls->error) ls->error = to_error(l.error());
        }
        notify();
    }
    void on_sender_error(proton::sender& s) override { link_error(s); }
    void on_sender_close(proton::sender& s) override { link_closed(s); }
    void on_sender_detach(proton::sender& s) override { link_closed(s); }

    void on_receiver_open(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) {
            ls->opened = true;
            ls->remote_address = r.source().address();
            const proton::value filters = r.source().filters().value();
            std::map<proton::symbol, proton::value> keyed;
            if (!filters.empty()) proton::get(filters, keyed);
            for (const auto& [key, value] : keyed) ls->remote_filters.push_back(key);
        }
        notify();
    }
    void on_receiver_error(proton::receiver& r) override { link_error(r); }
    void on_receiver_close(proton::receiver& r) override { link_closed(r); }
    void on_receiver_detach(proton::receiver& r) override { link_closed(r); }
    void on_receiver_drain_finish(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) {
            ++ls->drain_finished;
            ls->drain_credit = r.credit();
        }
        notify();
    }
    void on_message(proton::delivery& d, proton::message& m) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(d.receiver())) {
            const bool presettled = pn_delivery_settled(pn_of(d));
            ls->messages.push_back({m, presettled});
            ls->deliveries.push_back(d);
            ls->settled.push_back(presettled);
        }
        notify();
    }

    outcome* outcome_of(const proton::tracker& t) {
        auto it = trackers.find(pn_of(t));
        if (it == trackers.end()) return nullptr;
        return &links[it->second.first].outcomes[it->second.second];
    }
    void on_tracker_accept(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) o->kind = outcome_kind::accepted;
        notify();
    }
    void on_tracker_reject(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) {
            o->kind = outcome_kind::rejected;
            o->condition = to_error(pn_disposition_condition(pn_delivery_remote(pn_of(t))));
        }
        notify();
    }
    void on_tracker_release(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) {
            pn_delivery_t* d = pn_of(t);
            if (pn_delivery_remote_state(d) == PN_MODIFIED) {
                o->kind = outcome_kind::modified;
                o->delivery_failed = pn_disposition_is_failed(pn_delivery_remote(d));
                o->undeliverable_here = pn_disposition_is_undeliverable(pn_delivery_remote(d));
            } else {
                o->kind = outcome_kind::released;
            }
        }
        notify();
    }
    void on_tracker_settle(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t))
            if (o->kind == outcome_kind::none) o->kind = outcome_kind::settled_without_outcome;
        notify();
    }

  private:
    test_client& owner_;
    std::string address_;
    proton::connection_options copts_;
};

} // namespace wharf::server::test
