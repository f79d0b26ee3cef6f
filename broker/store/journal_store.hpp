#pragma once
// journal_store: the durable message store. An append-only journal of
// segment files in the node's data directory; group commit (one fdatasync
// covers every engine run since the last one); recovery on open; segments
// deleted oldest-first once nothing in them is live, and a sparse oldest
// segment compacted by copying its live messages forward.
//
// Threads: the message_store methods run on the queue engine's strand (they
// only append to a buffer and keep the bookkeeping); a writer thread of the
// store's own does every write, sync and unlink and reports each synced
// epoch through the callback. open() and the destructor run on the main
// thread, before the engine serves and after it stopped.

#include "broker/common/result.hpp"
#include "broker/engine/message_store.hpp"
#include "broker/engine/queue.hpp"
#include "broker/store/journal_writer.hpp"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::store {

struct journal_options {
    std::string dir;
    std::string node_id;
    uint64_t segment_bytes = 64ull << 20;
    // A segment whose live bytes fall below this fraction of its size is
    // compacted once it is the oldest.
    double compact_below = 0.25;
};

// What open() found on disk.
struct recovery_report {
    std::vector<std::pair<std::string, std::vector<engine::queue_entry>>> queues; // seq order
    uint64_t messages = 0;
    uint32_t segments = 0;
    uint64_t bytes = 0;
    std::vector<std::string> warnings; // torn or corrupt records skipped: what, where
    double seconds = 0;
};

class journal_store final : public engine::message_store {
  public:
    // Opens (creating if needed) `opts.dir`, refuses a directory of another
    // node or format, recovers every stored message into `report`.
    static result<std::unique_ptr<journal_store>, std::string> open(const journal_options& opts,
                                                                    recovery_report& report);
    ~journal_store() override;

    void on_enqueue(std::string_view queue, const engine::queue_entry& e) override;
    void on_update(std::string_view queue, const engine::queue_entry& e) override;
    void on_remove(std::string_view queue, uint64_t seq) override;
    uint64_t commit() override;
    bool writable() const override { return writer_->writable(); }
    std::string failure() const override { return writer_->failure(); }
    void set_synced_callback(synced_fn fn) override { writer_->set_synced_callback(std::move(fn)); }

    // For tests: segments on disk, live messages.
    std::vector<uint32_t> segments_for_test() const;
    uint64_t live_for_test() const { return live_count_; }

  private:
    struct live_entry {
        uint32_t segment;
        uint32_t bytes;           // size of its enqueue record
        engine::message_ref body;
        uint32_t delivery_count;
        uint8_t flags;
        int64_t expiry_ms;
    };
    struct segment_info {
        uint64_t live = 0;        // live messages whose enqueue record is here
        uint64_t live_bytes = 0;
        uint64_t size = 0;        // bytes written to it
    };

    journal_store(journal_options opts, std::unique_ptr<journal_writer> writer);
    void take_recovered(recovery_report& report, std::map<uint32_t, uint64_t> sizes);
    void append_enqueue_record(std::string_view queue, uint64_t seq, live_entry& le);
    void start_record(uint64_t bytes);
    void rotate();
    void retire_segments();
    void compact_oldest();

    journal_options opts_;
    std::unique_ptr<journal_writer> writer_;
    std::unordered_map<std::string, std::unordered_map<uint64_t, live_entry>> live_;
    uint64_t live_count_ = 0;
    std::map<uint32_t, segment_info> segments_;
    uint32_t active_ = 0;         // 0 until the first record after open
    uint32_t next_segment_ = 1;   // never reuses a number
    std::string buf_;             // records for the active segment since the last commit
    std::vector<journal_writer::chunk> chunks_; // earlier segments' records (rotation)
    std::vector<uint32_t> deletes_;
    std::string refused_;         // why a record was left out since the last commit
    uint64_t epoch_ = 0;
    int lock_fd_ = -1;            // flock on the data dir's LOCK, held while open
};

} // namespace wharf::store
