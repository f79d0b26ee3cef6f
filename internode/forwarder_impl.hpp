#pragma once
// forwarder::impl — the forwarder's state, private to internode/.
//
// Two sides:
//  - shared (any thread, under mu_): the inbox of messages handed to send(),
//    the connection pointer used to wake the proactor thread, and the stop
//    request;
//  - proactor thread only: the Proton connection, session and sender links,
//    messages waiting for credit, messages sent and not yet settled, and the
//    outcomes to report once the current event batch is done.
// forwarder.cpp has the public side, the thread loop and connection events;
// forwarder_links.cpp has links, transfers and dispositions.

#include "internode/forwarder.hpp"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/session.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace wharf::internode {

// One message between send() and its outcome.
struct pending_message {
    std::string address;
    std::string bytes; // emptied once Proton has copied it out
    forward_callback done;
};

// One sender link, keyed by its target address. Proactor thread only.
struct link_state {
    std::string address;
    pn_link_t* link = nullptr;
    std::deque<pending_message> queued;               // waiting for credit
    std::map<uint64_t, forward_callback> unsettled;   // by delivery tag, in send order
    uint64_t next_tag = 1;                            // also the delivery's context
};

class forwarder::impl {
  public:
    explicit impl(forwarder_options o);
    ~impl();
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    void send(const std::string& address, std::string bytes, forward_callback done);
    size_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
    bool broken() const { return broken_.load(std::memory_order_acquire); }

  private:
    // ---- proactor thread: forwarder.cpp
    void run();
    bool finished() const { return stop_seen_ && conn_ == nullptr && inactive_; }
    void handle(pn_event_t* e);
    void on_wake();
    void on_timeout();
    void begin_close();
    void connection_ended(const std::string& why);
    void connection_gone(pn_condition_t* transport_condition);
    void fail_inbox(const std::string& why);
    void final_drain();
    void report(forward_callback done, forward_result r, std::string description = {});
    void deliver_reports() noexcept;

    // ---- proactor thread: forwarder_links.cpp
    void route(pending_message m);
    link_state& link_for(const std::string& address);
    void pump(link_state& ls);
    void on_flow(pn_link_t* l);
    void on_delivery(pn_delivery_t* d);
    void on_link_remote_end(pn_link_t* l, bool closed);
    void on_session_remote_end(pn_session_t* s);
    void fail_link(link_state& ls, const std::string& why);
    void fail_all_links(const std::string& why);
    static link_state* state_of(pn_link_t* l);

    const forwarder_options opts_;
    const std::string peer_; // "host:port", for descriptions
    pn_proactor_t* proactor_;

    // Shared, under mu_.
    mutable std::mutex mu_;
    std::vector<pending_message> inbox_;
    pn_connection_t* wake_conn_ = nullptr; // nullptr once Proton frees the connection
    bool stopping_ = false;                // the destructor has begun
    bool sealed_ = false;                  // the thread has reported its last outcome
    std::atomic<size_t> in_flight_{0};
    std::atomic<bool> broken_{false};

    // Proactor thread only.
    pn_connection_t* conn_ = nullptr;
    pn_session_t* session_ = nullptr;
    std::unordered_map<std::string, std::unique_ptr<link_state>> links_;
    uint64_t link_counter_ = 0;
    bool remote_open_ = false;
    bool closing_ = false;     // we have closed (or are dropping) the connection
    bool stop_seen_ = false;   // this thread has seen stopping_
    bool inactive_ = false;    // PN_PROACTOR_INACTIVE: Proton has freed the connection
    std::string failure_;      // why the connection ended; first reason wins
    std::vector<std::pair<forward_callback, forward_outcome>> reports_;

    std::thread thread_;
};

// "name: description" of a condition, or `fallback` when none is set.
std::string condition_text(pn_condition_t* c, const std::string& fallback);

} // namespace wharf::internode
