#pragma once
// run_control: the state every thread of one run shares: the options, the
// clock, the stop flag, the first error, and the per-queue credit budgets of
// receive mode. Owned by main; outlives the container. All members are
// thread-safe (atomics, or the mutex for the error text).

#include "tools/wharf-bench/histogram.hpp"
#include "tools/wharf-bench/options.hpp"

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

class run_control {
public:
    explicit run_control(const bench_options& options);

    const bench_options& options() const { return options_; }

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

private:
    const bench_options& options_;
    std::atomic<bool> stop_sending_{false};
    std::atomic<bool> failed_{false};
    mutable std::mutex error_mutex_;
    std::string error_;
    bool budgeted_ = false;
    std::unique_ptr<std::atomic<std::int64_t>[]> budgets_;
    thread_histograms accept_latency_;
    thread_histograms e2e_latency_;
};

} // namespace wharf::bench
