#include "tools/wharf-bench/histogram.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

namespace wharf::bench {

// Bucket layout: index v for v < 128. For v >= 128 with highest set bit b
// (b >= 7), shift = b - 6 (>= 1) and the bucket is
// 128 + (shift - 1) * 64 + ((v >> shift) - 64): 64 buckets of width 2^shift
// cover [2^b, 2^(b+1)).
int latency_histogram::index_of(std::uint64_t v) {
    if (v < linear_limit) return static_cast<int>(v);
    const int shift = std::bit_width(v) - 1 - 6;
    if (shift > max_shift) return bucket_count - 1;
    return linear_limit + (shift - 1) * half + static_cast<int>((v >> shift) - half);
}

std::uint64_t latency_histogram::highest_equivalent(int index) {
    if (index < linear_limit) return static_cast<std::uint64_t>(index);
    const int shift = (index - linear_limit) / half + 1;
    const auto sub = static_cast<std::uint64_t>((index - linear_limit) % half + half);
    return ((sub + 1) << shift) - 1;
}

void latency_histogram::record(std::uint64_t value_ns) {
    ++counts_[static_cast<std::size_t>(index_of(value_ns))];
    ++count_;
    sum_ += value_ns;
    min_ = std::min(min_, value_ns);
    max_ = std::max(max_, value_ns);
}

void latency_histogram::merge(const latency_histogram& other) {
    for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
}

std::uint64_t latency_histogram::percentile(double p) const {
    if (count_ == 0) return 0;
    const double wanted = std::ceil(static_cast<double>(count_) * std::clamp(p, 0.0, 100.0) / 100.0);
    const auto target = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        seen += counts_[i];
        if (seen < target) continue;
        // The last bucket also holds every clamped value: its true top is max_.
        if (i + 1 == counts_.size()) return max_;
        return std::min(highest_equivalent(static_cast<int>(i)), max_);
    }
    return max_;
}

latency_histogram thread_histograms::merged() const {
    latency_histogram out;
    all_.for_each([&](const latency_histogram& h) { out.merge(h); });
    return out;
}

} // namespace wharf::bench
