#pragma once
// run_control: the state every thread of one run shares: the options, the
// clock, the stop flag, the first error, the per-queue credit budgets of
// receive mode, and what the links did (counted per thread). Owned by main;
// outlives the container. All members are thread-safe (atomics, or a mutex).

#include "tools/wharf-bench/histogram.hpp"
#include "tools/wharf-bench/options.hpp"
#include "tools/wharf-bench/per_thread.hpp"
#include "tools/wharf-bench/stats.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wharf::bench {

// Nanoseconds on the monotonic clock (shared by every process on the host).
inline std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count());
}

// What the links of one thread have done so far. One writer (that thread),
// any number of readers; relaxed atomics, so a store costs a plain move.
struct alignas(64) link_counters {
    std::atomic<std::uint64_t> sent{0};
    std::atomic<std::uint64_t> settled{0};   // sends the peer settled (or pre-settled ones)
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> rejected{0};
    std::atomic<std::uint64_t> released{0};  // released or modified
    std::atomic<std::uint64_t> received{0};
    std::atomic<std::uint64_t> foreign{0};   // pair/latency: arrived, not of this run (settled, not counted)
    std::atomic<std::uint64_t> last_progress_ns{0};

    static void bump(std::atomic<std::uint64_t>& c) {
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
};

class run_control {
public:
    explicit run_control(const bench_options& options);

    const bench_options& options() const { return options_; }

    // Marks this run's messages in pair and latency mode (their correlation
    // id), so that receivers tell them from what earlier runs or other
    // producers left on the queue. Random, fixed for the run.
    std::uint64_t run_id() const { return run_id_; }

    // Senders stop starting new messages once this is set (duration over,
    // error, or shutdown).
    bool stop_sending() const { return stop_sending_.load(std::memory_order_relaxed); }
    void set_stop_sending() { stop_sending_.store(true, std::memory_order_relaxed); }

    // Records the first run error ("condition: description"); later ones are
    // dropped. Safe from any thread.
    void fail(const std::string& what);
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    std::string error() const;

    // Receive mode with --count: takes up to `wanted` credits from the budget of
    // queue `queue_index`; returns how many were granted (0 when exhausted).
    // Without a count, returns `wanted`.
    std::uint32_t take_credit(int queue_index, std::uint32_t wanted);

    // Latency, recorded by the thread that saw it, merged after the run:
    // send to accepted (send mode, at-least-once) and send to arrival
    // (pair, latency).
    thread_histograms& accept_latency() { return accept_latency_; }
    thread_histograms& e2e_latency() { return e2e_latency_; }

    // The calling thread's counters, for a link's callbacks.
    link_counters& counters() { return counters_.local(); }
    // Summed over every thread; the latest message event (0: none).
    run_totals totals() const;
    std::uint64_t last_progress_ns() const;

    // Each link reports its first attach, and each sender that it is done,
    // once: the monitor then reads three numbers, not every link.
    void link_attached(bool sender, std::uint64_t at_ns);
    void sender_finished() { senders_finished_.fetch_add(1, std::memory_order_acq_rel); }
    int senders_attached() const { return senders_attached_.load(std::memory_order_acquire); }
    int receivers_attached() const { return receivers_attached_.load(std::memory_order_acquire); }
    int senders_finished() const { return senders_finished_.load(std::memory_order_acquire); }
    // The latest first attach of any link (0 if none).
    std::uint64_t last_attach_ns() const { return last_attach_ns_.load(std::memory_order_acquire); }

private:
    const bench_options& options_;
    const std::uint64_t run_id_;
    std::atomic<bool> stop_sending_{false};
    std::atomic<bool> failed_{false};
    mutable std::mutex error_mutex_;
    std::string error_;
    bool budgeted_ = false;
    std::unique_ptr<std::atomic<std::int64_t>[]> budgets_;
    thread_histograms accept_latency_;
    thread_histograms e2e_latency_;
    per_thread<link_counters> counters_;
    std::atomic<int> senders_attached_{0};
    std::atomic<int> receivers_attached_{0};
    std::atomic<int> senders_finished_{0};
    std::atomic<std::uint64_t> last_attach_ns_{0};
};

} // namespace wharf::bench
