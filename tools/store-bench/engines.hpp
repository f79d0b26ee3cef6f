#pragma once
// store-bench engines: one durable message store each, driven the way the
// queue engine drives broker/store/journal_store — a batch of enqueues and
// removes, then one durable commit (group commit) — and read back in queue
// order the way the broker recovers at start.

#include "broker/engine/queue.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace store_bench {

inline constexpr std::string_view queue_name = "orders";

// The body of message `seq`: the seq (8 bytes, little-endian), then
// pseudo-random bytes (incompressible, as many payloads are).
void make_body(uint64_t seq, char* out, size_t size);

class engine {
  public:
    virtual ~engine() = default;
    // One batch: enqueue seqs [enq_first, enq_first + enq_n) and remove seqs
    // [rm_first, rm_first + rm_n), each message by its own call (acks are
    // per message). Returns once the batch is durable — or, for the
    // pipelined journal, once the batch before it is.
    virtual void batch(uint64_t enq_first, uint32_t enq_n, uint64_t rm_first, uint32_t rm_n) = 0;
    // Returns once every batch is durable.
    virtual void drain() {}
    // Untimed, before a measurement that enqueues seqs up to `last_seq`:
    // the journal takes message bodies as shared message_refs that the
    // broker has already allocated (the queue and the store share them), so
    // the journal engine allocates them here rather than in batch(). The
    // other engines copy bytes from a buffer in batch(), as their APIs do.
    virtual void prepare(uint64_t last_seq) { (void)last_seq; }
    // Durable syncs the store performed (the journal's writer may cover more
    // than one batch with one sync when batches queue up).
    virtual uint64_t syncs() const = 0;
};

// Every engine this build has: journal, journal-pipelined, sqlite,
// sqlite-rowid, rocksdb, lmdb (when built with LMDB).
std::vector<std::string> engine_names();
bool pipelined_variant(const std::string& name); // same on-disk store as another engine

std::unique_ptr<engine> open_engine(const std::string& name, const std::string& dir, size_t body_size);

// What the broker does at start: open the store and read every live
// message into memory, queue by queue in seq order (as queue_entry with a
// message_ref body, whatever the engine). `seconds` covers exactly that.
struct recovered {
    double seconds = 0;
    std::vector<std::pair<std::string, std::vector<wharf::engine::queue_entry>>> queues;
};
recovered recover(const std::string& name, const std::string& dir);

} // namespace store_bench
