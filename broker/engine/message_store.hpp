#pragma once
// message_store: where the queue engine records what must survive a restart.
// The engine calls it on its strand for every message that enters or leaves
// a queue. memory_store keeps nothing (the queues themselves hold the
// messages, and a restart loses them); the durable store (issue #3) plugs in
// here.

#include <cstdint>
#include <string_view>

namespace wharf::engine {

struct queue_entry;

class message_store {
  public:
    virtual ~message_store() = default;
    virtual void on_enqueue(std::string_view queue, const queue_entry& e) = 0;
    virtual void on_remove(std::string_view queue, uint64_t seq) = 0;
};

// Counts what it is told; stores nothing. Engine strand only.
class memory_store final : public message_store {
  public:
    void on_enqueue(std::string_view, const queue_entry&) override { ++enqueued_; }
    void on_remove(std::string_view, uint64_t) override { ++removed_; }
    uint64_t enqueued() const { return enqueued_; }
    uint64_t removed() const { return removed_; }

  private:
    uint64_t enqueued_ = 0;
    uint64_t removed_ = 0;
};

} // namespace wharf::engine
