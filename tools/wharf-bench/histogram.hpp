#pragma once
// latency_histogram: a fixed log-linear bucket array in the style of
// HdrHistogram. Values (nanoseconds) below 128 are exact; above, each power of
// two is split into 64 buckets, so a bucket is at most 1/64 (1.6 %) wide.
// Recording is one index computation and one increment, with no allocation.
//
// Not thread-safe: each recording thread has its own (thread_histograms
// below); main merges them after the container has stopped.

#include "tools/wharf-bench/per_thread.hpp"

#include <array>
#include <cstdint>

namespace wharf::bench {

class latency_histogram {
public:
    void record(std::uint64_t value_ns);
    void merge(const latency_histogram& other);

    std::uint64_t count() const { return count_; }
    std::uint64_t max() const { return max_; }
    std::uint64_t min() const { return count_ ? min_ : 0; }
    double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0; }
    // The highest value equivalent to the p-th percentile (0 < p <= 100);
    // 0 when empty. Never above max().
    std::uint64_t percentile(double p) const;

private:
    static constexpr int linear_limit = 128;  // values [0,128) have their own bucket
    static constexpr int half = 64;           // sub-buckets per power of two above that
    static constexpr int max_shift = 40;      // covers values up to 2^47 ns (~39 hours)
    static constexpr int bucket_count = linear_limit + max_shift * half;

    static int index_of(std::uint64_t v);
    static std::uint64_t highest_equivalent(int index);

    std::array<std::uint64_t, bucket_count> counts_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ = 0;
    std::uint64_t min_ = UINT64_MAX;
    std::uint64_t max_ = 0;
};

// One latency_histogram per thread that records into it (per_thread.hpp);
// merged() adds them up once every writer stopped.
class thread_histograms {
public:
    // The calling thread's histogram.
    latency_histogram& local() { return all_.local(); }
    void record(std::uint64_t value_ns) { local().record(value_ns); }
    // Call only when no thread records any more.
    latency_histogram merged() const;

private:
    per_thread<latency_histogram> all_;
};

} // namespace wharf::bench
