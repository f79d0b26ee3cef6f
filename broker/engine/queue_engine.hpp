#pragma once
// queue_engine: every queue of the node, and the consumers and producers
// bound to them. An actor: its state is touched only by the strand that runs
// posted command batches one at a time, never under a lock on the message
// path. post() runs the batch right away on the caller's thread when the
// strand is idle (no hand-off latency on one thread) and otherwise queues it
// for the thread that is running the strand. Results go to each connection's
// outbox, one hand-over per connection per run.

#include "broker/config/node_config.hpp"
#include "broker/engine/message_store.hpp"
#include "broker/engine/protocol.hpp"
#include "broker/engine/queue.hpp"

#include <atomic>
#include <functional>
#include <optional>
#include <memory>
#include <deque>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::engine {

struct engine_options {
    std::string node_id = "wharf";
    bool auto_create_queues = true;
    config::queue_policy queue_defaults;
    std::vector<config::queue_declaration> queues; // created at start
    // Wall-clock milliseconds since the epoch (absolute-expiry-time uses it).
    std::function<int64_t()> clock;
    // The largest message the node takes (0: message_ref::max_size): a
    // modified outcome's annotations never grow a message past it.
    uint64_t max_message_size = 0;
};

// A consistent copy of one queue's figures, for management and tests.
struct queue_stats {
    std::string name;
    uint64_t depth = 0;
    uint64_t depth_bytes = 0;
    uint64_t consumers = 0;
    bool dynamic = false;
    queue_counters counters;
    uint64_t client_links = 0;   // consumers and producers of connections (no internal taps)
    uint64_t producers = 0;      // producers of connections bound to this queue (not anonymous ones)
    config::queue_policy policy;
};

class queue_engine final : private dispatch_sink {
  public:
    queue_engine(engine_options opts, message_store& store);
    ~queue_engine() override;
    queue_engine(const queue_engine&) = delete;
    queue_engine& operator=(const queue_engine&) = delete;

    // Thread-safe.
    void post(std::vector<command>&& batch);
    void post(command&& c);
    // Thread-safe: posts batch's commands and leaves batch empty, with the
    // capacity of a batch that already ran (for a connection that posts a
    // batch every event batch: its vector is not grown from nothing each
    // time).
    void post_reusing(std::vector<command>& batch);
    // Thread-safe; never runs the strand on the calling thread (for threads
    // that have other work: the store's writer, plugins' workers).
    void post_detached(command&& c);

    // Thread-safe: runs on the strand (waits for it). Not for the message path.
    std::vector<queue_stats> stats();
    // Thread-safe, waiting for the strand: the queues other than temporary
    // ones, and the messages they hold. Cheap beside stats() (no
    // names, no link counts): the WLM reports it at every heartbeat.
    struct totals_t {
        uint64_t queues = 0;
        uint64_t messages = 0;
    };
    totals_t totals();
    // Thread-safe, without waiting: changes whenever a queue other than a
    // temporary one is created or removed, so that a caller that walks
    // every queue now and then (the WLM's hand-over tick) can skip the walk
    // while nothing changed. (Every management client's reply queue would
    // otherwise cost a walk.)
    uint64_t queue_set_version() const { return queue_set_version_.load(std::memory_order_acquire); }
    // Management, thread-safe, waiting for the strand. purge: removes the
    // messages waiting in `queue` (not those out for delivery); how many, or
    // nullopt without such a queue. remove: deletes the queue, its messages
    // (stored ones too) and detaches its links; false without such a queue.
    std::optional<uint64_t> purge(const std::string& queue);
    bool remove(const std::string& queue);
    // create: makes `queue` with the default policy; false if it exists.
    // configure: applies `change` to the queue's policy (producers blocked
    // by a limit that was raised go on); the new policy, or nullopt without
    // such a queue.
    bool create(const std::string& queue);
    // has_queue: whether `queue` exists now (a temporary one too).
    // auto_creates_queues: whether a message to an unknown queue makes it.
    bool has_queue(const std::string& queue);
    bool auto_creates_queues() const { return opts_.auto_create_queues; }
    std::optional<config::queue_policy> configure(const std::string& queue,
                                                  const std::function<void(config::queue_policy&)>& change);

    // Before serving: puts messages recovered from the store back into their
    // queue (created with its declared or default policy), in seq order.
    void load(const std::string& queue, std::vector<queue_entry>&& entries);

    // Prefix of the generated names of dynamic (temporary) queues.
    static constexpr std::string_view dynamic_prefix = "$dynamic.";

  private:
    struct producer {
        link_id id = 0;
        queue* q = nullptr;       // nullptr: anonymous relay
        std::shared_ptr<outbox> out;
        bool blocked = false;     // told to stop granting credit
        // Block policy: messages that arrived while their queue was full,
        // in arrival order. They are neither queued nor settled until there
        // is room (at most the credit window per producer).
        std::deque<incoming_message> backlog;
        uint64_t unsynced = 0;    // answers waiting for the store (keep order)
    };

    // A producer's answer that must wait until the store has synced.
    struct waiting_publish {
        uint64_t epoch;
        std::shared_ptr<outbox> out;
        ev_published ev;
        std::vector<uint32_t> stored; // positions in ev of the messages the sync covers
    };

    // What became of one message a producer sent.
    struct publish_step {
        enum { done, failed, full } kind;
        queue* full_queue = nullptr;
        error err{errc::internal_error, {}};
        bool stored = false;      // a persistent message was recorded
    };

    void run(command& c);
    void drain_inbox();
    void runner();
    void handle(cmd_attach_consumer& c);
    void handle(cmd_attach_producer& c);
    void handle(cmd_credit& c);
    void enqueue(std::vector<command>&& batch, std::vector<command>* give_back);
    void handle(cmd_publish& c);
    void handle(cmd_settle& c);
    void handle(cmd_detach& c);
    void handle(cmd_tick& c);
    void handle(cmd_run& c);
    void handle(cmd_detach_queues& c);
    void handle(cmd_delete_queue_if_idle& c);
    void finish_run();
    void drain_backlog(producer& p);
    void answer(producer& p, ev_published&& ev, std::vector<uint32_t>&& stored);
    void handle(cmd_synced& c);
    void forget_stored(queue& q, const queue_entry& e);
    void acknowledge(queue& q, const queue_entry& e);
    publish_step publish_one(producer& p, incoming_message& m, int64_t now_ms);
    void set_blocked(producer& p, queue* full_queue);

    result<queue*, error> resolve(const std::string& address, bool create);
    queue* create_queue(const std::string& name, bool dynamic);
    void delete_queue(queue* q);
    void dead_letter(queue& from, queue_entry&& e);
    // rewritten: the message's bytes changed (annotated), so a stored one
    // is stored again, not just its delivery count.
    void return_entry(queue& q, queue_entry&& e, bool rewritten = false);
    bool annotate(queue& q, queue_entry& e, const std::vector<annotation_change>& changes);
    void touch(queue* q);
    void stage(const std::shared_ptr<outbox>& o, event&& ev);
    int64_t now() const { return opts_.clock(); }

    // dispatch_sink
    void deliver(consumer& c, const queue_entry& e, bool settle_on_send) override;
    void drained(consumer& c) override;
    void expired(queue& q, queue_entry&& e) override;

    engine_options opts_;
    message_store& store_;
    std::unordered_map<std::string, std::unique_ptr<queue>> queues_;
    std::unordered_map<link_id, std::unique_ptr<consumer>> consumers_;
    std::unordered_map<link_id, producer> producers_;
    std::unordered_map<queue*, link_id> dynamic_owner_;
    std::vector<queue*> touched_;
    std::vector<queue*> doomed_;
    std::vector<std::shared_ptr<outbox>> dirty_;
    std::vector<waiting_publish> this_run_;   // epoch assigned at commit
    std::deque<waiting_publish> waiting_;     // in epoch order
    uint64_t last_epoch_ = 0;                 // the store's latest commit
    uint64_t dynamic_counter_ = 0;

    // The strand.
    std::mutex mu_;
    std::vector<std::vector<command>> inbox_;
    std::vector<std::vector<command>> spare_; // emptied batches, for post_reusing
    bool running_ = false;
    std::condition_variable runner_cv_;
    bool runner_wanted_ = false;
    bool runner_stop_ = false;
    std::thread runner_thread_;
    std::atomic<uint64_t> queue_set_version_{0};
};

} // namespace wharf::engine
