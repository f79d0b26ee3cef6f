#pragma once
// busy_poll: how long a worker keeps asking the proactor for its next event
// batch before it goes to sleep in pn_proactor_wait.
//
// Why: a worker that sleeps is woken by the kernel when a socket becomes
// readable or another connection wakes it. On a virtual machine whose idle
// vCPU halts (guest halt-polling off, as on the machines this project is
// measured on), each such wake is a VM exit and an inter-processor
// interrupt: tens of microseconds on every hop of a message that finds the
// node idle. A relayed message makes four such hops where a direct one
// makes two. Polling for a short while after a batch finds the next event
// without sleeping when it comes soon.
//
// The window adapts, as the kernel's haltpoll governor does for idle vCPUs,
// to how long the worker was idle before each event that found it asleep
// (its poll and its sleep together): it grows (to `limit`) when that was
// within `limit`, i.e. when polling a little longer would have caught the
// event, and halves when it was longer. An idle node, or one whose events
// are further apart than `limit`, stops polling after a few events and
// costs nothing; a node whose events come closer than `limit` apart polls
// through the gaps, which costs CPU up to the whole worker while it lasts.
// `limit` 0 turns it off. Only a node with one worker polls
// (node_config::busy_poll_in_effect).
//
// Only after a light batch (at most `light_batch_events` events, a few
// messages): a node under load gets many messages a batch, its wake costs
// little per message, and polling there takes the CPU its clients need to
// send the next ones (measured: produce+consume through one node 12 % slower
// when it polled after every batch, no slower with this rule).
//
// Threads: one poll_window per worker thread; no sharing. wake_connection:
// any thread.

#include <proton/connection.h>
#include <proton/proactor.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace wharf::server {

// Every pn_connection_wake of the node goes through wake_connection(), which
// counts it. Proton's pn_proactor_get does not take every wake: a wake
// signals the proactor's event fd only for the first entry of its ready
// list since a pn_proactor_wait last read that list, so a worker that only
// polls would miss the second connection it woke until it waits. The poll loop (server.cpp)
// stops polling as soon as the count moves and goes on to pn_proactor_wait,
// which reads Proton's ready list (see server::next_batch).
inline std::atomic<uint64_t>& connection_wakes() {
    static std::atomic<uint64_t> n{0};
    return n;
}
inline void wake_connection(pn_connection_t* c) {
    pn_connection_wake(c);
    connection_wakes().fetch_add(1, std::memory_order_release);
}

class poll_window {
  public:
    using duration = std::chrono::nanoseconds;

    explicit poll_window(duration limit) : limit_(limit) {}

    // A batch of more events than this means load, not waiting: no poll.
    static constexpr int light_batch_events = 16;

    // How long to poll before sleeping now, after a batch of `last_events`
    // events; zero: sleep at once.
    duration window(int last_events) const {
        return last_events <= light_batch_events ? window_ : duration::zero();
    }

    // After an event that found the worker asleep (pn_proactor_wait), idle
    // for `idle` since its last batch: the poll before the sleep and the
    // sleep together.
    void idled(duration idle) {
        if (limit_ <= duration::zero()) return;
        if (idle <= limit_) {
            // The event came within the limit: poll long enough for it.
            window_ = std::min(limit_, std::max(window_ * 2, std::max(idle, step())));
        } else {
            window_ /= 2;
            if (window_ < step()) window_ = duration::zero();
        }
    }

  private:
    // The smallest window worth polling for: an eighth of the limit.
    duration step() const { return limit_ / 8; }

    duration limit_;
    duration window_{0};
};

} // namespace wharf::server
