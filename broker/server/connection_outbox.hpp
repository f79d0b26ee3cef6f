#pragma once
// connection_outbox: the queue engine's way into one connection. The engine
// hands over a batch of events (any thread); the connection takes them on its
// own thread when woken. Once the connection is gone, events are dropped: the
// engine released whatever they carried when it processed the detach.

#include "broker/engine/protocol.hpp"

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
        const bool wake = pending_.empty();
        if (wake) {
            pending_ = std::move(events);
        } else {
            pending_.insert(pending_.end(), std::make_move_iterator(events.begin()),
                            std::make_move_iterator(events.end()));
        }
        if (wake) pn_connection_wake(conn_);
    }

    // Connection thread: swaps the pending events into `out` (which it clears).
    void take(std::vector<engine::event>& out) {
        out.clear();
        std::lock_guard lock(mu_);
        out.swap(pending_);
    }

    // Connection thread, before the connection is freed.
    void close() {
        std::lock_guard lock(mu_);
        conn_ = nullptr;
        pending_.clear();
    }

  private:
    std::mutex mu_;
    pn_connection_t* conn_;
    std::vector<engine::event> pending_;
};

} // namespace wharf::server
