#pragma once
// connection_outbox: the queue engine's way into one connection. The engine
// hands over a batch of events (any thread); the connection takes them on its
// own thread when woken. Once the connection is gone, events are dropped: the
// engine released whatever they carried when it processed the detach.

#include "broker/engine/protocol.hpp"
#include "broker/server/busy_poll.hpp"
#include "plugins/api/plugin.hpp"

#include <proton/connection.h>
#include <proton/proactor.h>

#include <mutex>
#include <vector>

namespace wharf::server {

class connection_outbox final : public engine::outbox {
  public:
    explicit connection_outbox(pn_connection_t* c) : conn_(c) {}

    void deliver(std::vector<engine::event>&& events) override {
        std::lock_guard lock(mu_);
        if (conn_ == nullptr) return;
        const bool wake = !holding_ && pending_.empty() && resolutions_.empty();
        if (pending_.empty()) {
            // A swap, not a move: the engine's staging vector gets back the
            // capacity the connection left here after its last take(), so
            // neither side regrows its vector every run.
            pending_.swap(events);
        } else {
            pending_.insert(pending_.end(), std::make_move_iterator(events.begin()),
                            std::make_move_iterator(events.end()));
            events.clear();
        }
        if (wake) wake_connection(conn_);
    }

    // A resolver's answer for a link's attach (any thread).
    struct resolved {
        engine::link_id link;
        size_t resolver;          // which resolver of the chain answered
        plugins::resolution r;
        std::string anon_to;      // set: not an attach but anonymous-relay messages to this address
    };
    void deliver_resolution(resolved&& r) {
        std::lock_guard lock(mu_);
        if (conn_ == nullptr) return;
        const bool wake = !holding_ && pending_.empty() && resolutions_.empty();
        resolutions_.push_back(std::move(r));
        if (wake) wake_connection(conn_);
    }

    // Connection thread: swaps the pending events into `out` (which it clears).
    void take(std::vector<engine::event>& out, std::vector<resolved>& res) {
        out.clear();
        res.clear();
        std::lock_guard lock(mu_);
        out.swap(pending_);
        res.swap(resolutions_);
    }

    // Connection thread, around the part of its event batch that takes
    // events: what arrives meanwhile (mostly from the engine running on this
    // very thread) is taken before the batch ends, so it needs no wake-up.
    // A wake-up makes Proton hand the connection back for another batch,
    // which on the latency path costs a round through the proactor.
    void hold_wakes() {
        std::lock_guard lock(mu_);
        holding_ = true;
    }
    // Ends the hold; wakes the connection if events came after its last take.
    void release_wakes() {
        std::lock_guard lock(mu_);
        holding_ = false;
        if (conn_ != nullptr && (!pending_.empty() || !resolutions_.empty())) wake_connection(conn_);
    }

    // Connection thread, before the connection is freed.
    void close() {
        std::lock_guard lock(mu_);
        conn_ = nullptr;
        pending_.clear();
        resolutions_.clear();
    }

  private:
    std::mutex mu_;
    pn_connection_t* conn_;
    std::vector<engine::event> pending_;
    std::vector<resolved> resolutions_;
    bool holding_ = false;
};

} // namespace wharf::server
