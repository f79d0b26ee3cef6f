#pragma once
// journal_writer: the store's own thread. Takes jobs (bytes for numbered
// segments, then segments to delete), writes them in order, fdatasyncs once
// per batch of jobs (group commit), and reports the batch's last epoch as
// synced. On a write or sync error (disk full, I/O error) it cuts the
// segment back to its last synced size, reports the epochs as failed, and
// is not writable until a probe write succeeds (tried every second).

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
    bool write_job(job& j, std::string& reason);
    bool open_segment(uint32_t segment, std::string& reason);
    bool write_all(const std::string& bytes, std::string& reason);
    void report(uint64_t epoch, bool ok, const std::string& reason);

    const std::string dir_;
    int fd_ = -1;
    uint32_t segment_ = 0;
    uint64_t synced_size_ = 0;    // of the open segment
    uint64_t size_ = 0;
    std::vector<uint32_t> pending_deletes_; // writer thread: waiting for a good sync

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
