#pragma once
// journal_writer: the store's own thread. Takes jobs (bytes for numbered
// segments, then segments to delete), writes them in order, fdatasyncs once
// per batch of jobs (group commit), and reports the batch's last epoch as
// synced.
//
// A write or sync error (disk full, I/O error) loses nothing the store
// counts as written. The writer cuts the segment back to its last synced
// size (no half record, no hole), reports the batch's epoch as failed, and
// is not writable until an attempt succeeds. It keeps, in order, every
// record not known to be synced, and every delete. Each later attempt (the
// next batch, or a probe once a second when nothing comes) writes the kept
// records first, then the new ones, and syncs. Only after that sync does
// it run the kept deletes. So the files end up as the store's bookkeeping
// says. An ok report therefore covers every earlier record too. Kept
// records are reported once, with the failed batch, and not again when
// they land.
//
// What is kept grows, while the disk fails, only by what the store is told
// then: the engine refuses durable messages while !writable(), and
// journal_store does not compact. What is left are removes and
// delivery-count updates of stored messages, the copies of messages
// dead-lettered meanwhile, and the jobs committed before the failure was
// seen.
#include "broker/engine/message_store.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wharf::store {

class journal_writer {
  public:
    struct chunk {
        uint32_t segment;
        std::string bytes;
    };
    struct job {
        uint64_t epoch;
        std::vector<chunk> chunks;
        std::vector<uint32_t> deletes;
        // Not empty: a record the store could not represent was left out;
        // the epoch is reported failed with this reason (the rest is written).
        std::string refused;
    };

    journal_writer(std::string dir, uint32_t segment, uint64_t size);
    ~journal_writer(); // writes what is queued, then stops
    journal_writer(const journal_writer&) = delete;
    journal_writer& operator=(const journal_writer&) = delete;

    void submit(job&& j);
    // An empty buffer for records: one the writer has written out (its
    // capacity kept, its pages already touched) when there is one, else a
    // new one with 64 KB reserved. A fresh buffer per commit cost a
    // reallocation, copies and page faults as it grew (11 % of a durable
    // producer's node in `perf`).
    std::string spare();
    bool writable() const { return writable_.load(std::memory_order_acquire); }
    std::string failure() const;
    void set_synced_callback(engine::message_store::synced_fn fn);

  private:
    void run();
    bool write_and_sync(bool probe, size_t& synced, std::string& reason);
    bool open_segment(uint32_t segment, std::string& reason);
    bool close_segment(std::string& reason);
    bool cut_back(std::string& reason);
    bool write_all(const std::string& bytes, std::string& reason);
    void delete_segments();
    void report(uint64_t epoch, bool ok, const std::string& reason);
    void drop_synced(size_t n);

    // Writer thread only.
    const std::string dir_;
    int fd_ = -1;
    uint32_t segment_ = 0;        // the open segment, or the last one open
    uint32_t created_ = 0;        // the last segment this writer created (O_EXCL)
    uint64_t synced_size_ = 0;    // of segment_: what a failure cuts back to
    uint64_t size_ = 0;           // of segment_: written
    bool tail_dirty_ = false;     // segment_ may hold bytes past synced_size_
    std::vector<chunk> unsynced_; // in order: written by no good sync yet
    std::vector<uint32_t> pending_deletes_; // waiting for a good sync

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<job> jobs_;
    std::vector<std::string> spares_; // written-out buffers, emptied, for spare()
    bool stop_ = false;
    std::string failure_;
    std::atomic<bool> writable_{true};
    std::mutex cb_mu_;
    engine::message_store::synced_fn synced_;
    std::thread thread_;
};

} // namespace wharf::store
