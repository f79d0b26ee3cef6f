#pragma once
// queue: one named queue's messages and consumers, and the policy that hands
// messages to consumers. Pure logic: no sockets, no threads. Owned by the
// queue_engine and touched only on the engine's strand.
//
// Messages keep their place: an `available_` deque ordered by sequence
// number; a released message goes back to its old position. Acquired
// messages live with the consumer that holds them until settled.

#include "broker/config/node_config.hpp"
#include "broker/engine/message_body.hpp"
#include "broker/engine/protocol.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

namespace wharf::engine {

struct queue_entry {
    uint64_t seq = 0;
    message_ref body;
    int64_t expiry_ms = 0;        // absolute; 0 = never
    uint32_t delivery_count = 0;
    bool redelivered = false;     // acquired before: first-acquirer is false now
    bool durable = false;         // the header says durable
    bool persistent = false;      // durable message on a durable queue: in the store
    std::unique_ptr<std::vector<link_id>> excluded; // undeliverable-here links

    bool expired(int64_t now_ms) const { return expiry_ms != 0 && now_ms >= expiry_ms; }
    bool excludes(link_id l) const;
    // One more failed delivery. The header's delivery-count is a uint: it
    // stays at its largest value rather than wrap to 0 (which would also
    // escape max-delivery-count).
    void count_delivery() {
        if (delivery_count != UINT32_MAX) ++delivery_count;
    }
};

class queue;

// The messages one consumer holds unsettled, in sequence order. Clients
// mostly settle in the order they received, which is that order (but for
// redeliveries), so the list is a deque that settles at its front: no
// allocation per message and no hash lookup, which at 10,000 consumers with
// cold memory cost a cache miss or two per message each. A message settled
// out of order leaves a hole that is dropped when it reaches an end, or when
// holes outnumber the messages held.
class acquired_list {
  public:
    void add(queue_entry&& e);
    // Removes the message with this seq; false if it is not held.
    bool take(uint64_t seq, queue_entry& out);
    size_t size() const { return live_; }
    bool empty() const { return live_ == 0; }
    // Every message held, in seq order.
    template <typename F> void for_each(F&& f) {
        for (auto& s : slots_)
            if (s.live) f(s.e);
    }
    // Removes and returns every message held, in seq order.
    std::vector<queue_entry> take_all();

  private:
    struct slot {
        queue_entry e;
        bool live = true;
    };
    void trim();
    std::deque<slot> slots_;  // by seq; holes keep their seq for the search
    size_t live_ = 0;
};

// A receiving link bound to a queue.
struct consumer {
    link_id id = 0;
    queue* q = nullptr;
    outbox* out = nullptr;
    std::shared_ptr<outbox> out_owner;
    uint64_t limit = 0;           // see cmd_credit
    uint64_t assigned = 0;        // deliveries handed to the connection
    bool drain = false;
    bool browse = false;
    bool settle_on_send = false;
    uint64_t browse_cursor = 0;   // browse: highest seq already shown
    acquired_list acquired;       // sent, not yet settled
    // Its queue moved (cmd_detach_queues): out of dispatch, it waits for the
    // connection's cmd_detach to learn which of `acquired` the client got.
    bool leaving = false;
    std::shared_ptr<const amqp::selector> selector; // see cmd_attach_consumer
    // With a selector: every available message below this seq is one the
    // consumer does not select (or excludes), so that a run of them at the
    // head is read once, not at every delivery. A message put back below it
    // lowers it (queue::restore).
    uint64_t select_from = 0;

    bool selects(const queue_entry& e) const;
    uint64_t credit() const { return limit > assigned ? limit - assigned : 0; }
};

// What a queue asks of its owner while dispatching.
class dispatch_sink {
  public:
    virtual ~dispatch_sink() = default;
    virtual void deliver(consumer& c, const queue_entry& e, bool settle_on_send) = 0;
    virtual void drained(consumer& c) = 0;
    // `e` expired while queued; it has already left the queue.
    virtual void expired(queue& q, queue_entry&& e) = 0;
};

struct queue_counters {
    uint64_t enqueued = 0;
    uint64_t delivered = 0;
    uint64_t acknowledged = 0;
    uint64_t expired = 0;
    uint64_t dead_lettered = 0;
    uint64_t rejected_full = 0;
};

class queue {
  public:
    queue(std::string name, config::queue_policy policy, bool dynamic);

    const std::string& name() const { return name_; }
    const config::queue_policy& policy() const { return policy_; }
    // Management changed a limit or the dead-letter queue; durable stays.
    void set_policy(config::queue_policy p) { policy_ = std::move(p); }
    bool dynamic() const { return dynamic_; }
    uint64_t depth() const { return depth_; }
    uint64_t depth_bytes() const { return depth_bytes_; }
    uint64_t available() const { return available_.size(); }
    const queue_counters& counters() const { return counters_; }

    // True when another message would go over a max-depth limit.
    bool full(size_t next_size) const;

    // Appends a new message; assigns its sequence number.
    void enqueue(queue_entry&& e);
    // Appends a message recovered from the store with its own sequence
    // number (callers load in sequence order).
    void load(queue_entry&& e);
    // Puts a message that left the queue back at its place (by seq).
    void restore(queue_entry&& e);
    // A message acquired from this queue is gone for good (accepted,
    // dead-lettered, dropped).
    void forget(const queue_entry& e);
    // A message out for delivery gets new bytes (a consumer's modified
    // outcome annotated it): the queue's byte depth follows.
    void replace_body(queue_entry& e, message_ref body);

    void add_consumer(consumer* c);
    void remove_consumer(consumer* c);
    size_t consumer_count() const { return consumers_.size(); }

    // Hands available messages to consumers with credit, fairly (round
    // robin), then answers drains that have nothing left to take.
    void dispatch(int64_t now_ms, dispatch_sink& sink);

    // Removes every expired message; returns how many.
    size_t expire(int64_t now_ms, dispatch_sink& sink);

    // Removes every message (queue deletion); returns them.
    std::deque<queue_entry> take_all();

    // Producers waiting for room (block policy).
    std::vector<link_id>& blocked_producers() { return blocked_; }

    queue_counters& counters_for_update() { return counters_; }

    // The message enqueue() just appended.
    const queue_entry& last_entry() const { return available_.back(); }

    // The engine's once-per-run dispatch list: true if newly marked.
    bool mark_touched() { return !std::exchange(touched_, true); }
    void clear_touched() { touched_ = false; }

  private:
    bool serve_one(consumer& c, int64_t now_ms, dispatch_sink& sink);
    void serve_browser(consumer& c, int64_t now_ms, dispatch_sink& sink);

    std::string name_;
    config::queue_policy policy_;
    bool dynamic_;
    std::deque<queue_entry> available_;
    uint64_t next_seq_ = 1;
    uint64_t depth_ = 0;          // available + acquired
    uint64_t depth_bytes_ = 0;
    uint64_t expiring_ = 0;       // messages with an expiry, roughly (for the sweep)
    std::vector<consumer*> consumers_;
    size_t selecting_ = 0; // consumers_ with a selector
    size_t next_consumer_ = 0;
    std::vector<link_id> blocked_;
    queue_counters counters_;
    bool touched_ = false;
};

} // namespace wharf::engine
