#pragma once
// message_store: where the queue engine records what must survive a restart.
// The engine calls it on its strand for every persistent message (a durable
// message on a durable queue) that enters a queue, changes delivery count, or
// leaves; at the end of each engine run it calls commit(), and the store
// makes everything recorded so far stable in the background (group commit:
// one sync covers every run since the last one). The store reports each
// stable epoch through the callback the engine installs, from any thread.
//
// memory_store keeps nothing (messages live in the queues and are lost on
// restart); journal_store (broker/store) keeps them on disk.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace wharf::engine {

struct queue_entry;

class message_store {
  public:
    // epoch: everything committed up to it is stable (ok) or failed (!ok,
    // with a reason a person can act on).
    using synced_fn = std::function<void(uint64_t epoch, bool ok, const std::string& reason)>;

    virtual ~message_store() = default;
    // on_enqueue of a seq that is stored already replaces it (its bytes
    // changed: a modified outcome's annotations).
    virtual void on_enqueue(std::string_view queue, const queue_entry& e) = 0;
    virtual void on_update(std::string_view queue, const queue_entry& e) = 0;
    virtual void on_remove(std::string_view queue, uint64_t seq) = 0;
    // Starts making what was recorded stable. Returns the epoch that will
    // cover it, or 0 when everything recorded is stable already.
    virtual uint64_t commit() = 0;
    // False while the store cannot write (disk full, I/O error): persistent
    // messages are then refused.
    virtual bool writable() const = 0;
    // Why not writable.
    virtual std::string failure() const = 0;
    virtual void set_synced_callback(synced_fn fn) = 0;
};

// Counts what it is told; stores nothing. Engine strand only.
class memory_store final : public message_store {
  public:
    void on_enqueue(std::string_view, const queue_entry&) override { ++enqueued_; }
    void on_update(std::string_view, const queue_entry&) override {}
    void on_remove(std::string_view, uint64_t) override { ++removed_; }
    uint64_t commit() override { return 0; }
    bool writable() const override { return true; }
    std::string failure() const override { return {}; }
    void set_synced_callback(synced_fn) override {}
    uint64_t enqueued() const { return enqueued_; } // (a replacement counts again)
    uint64_t removed() const { return removed_; }

  private:
    uint64_t enqueued_ = 0;
    uint64_t removed_ = 0;
};

} // namespace wharf::engine
