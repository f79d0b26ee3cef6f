#include "tools/wharf-bench/histogram.hpp"

#include <gtest/gtest.h>

#include <cstdint>

using wharf::bench::latency_histogram;

TEST(latency_histogram, empty_reports_zero) {
    latency_histogram h;
    EXPECT_EQ(h.count(), 0u);
    EXPECT_EQ(h.percentile(50), 0u);
    EXPECT_EQ(h.max(), 0u);
}

TEST(latency_histogram, small_values_are_exact) {
    latency_histogram h;
    for (std::uint64_t v = 1; v <= 100; ++v) h.record(v);
    EXPECT_EQ(h.count(), 100u);
    EXPECT_EQ(h.percentile(50), 50u);
    EXPECT_EQ(h.percentile(90), 90u);
    EXPECT_EQ(h.percentile(100), 100u);
    EXPECT_EQ(h.min(), 1u);
}

TEST(latency_histogram, large_values_within_bucket_precision) {
    latency_histogram h;
    for (std::uint64_t i = 1; i <= 10000; ++i) h.record(i * 1000);  // 1 us .. 10 ms
    for (const double p : {50.0, 90.0, 99.0}) {
        const double exact = p / 100.0 * 10000 * 1000;
        const double got = static_cast<double>(h.percentile(p));
        EXPECT_GE(got, exact * 0.999) << p;
        EXPECT_LE(got, exact * 1.02) << p;  // a bucket is at most 1/64 wide
    }
    EXPECT_EQ(h.max(), 10'000'000u);
    EXPECT_EQ(h.percentile(100), 10'000'000u);
}

TEST(latency_histogram, merge_adds_counts) {
    latency_histogram a, b;
    a.record(10);
    b.record(1'000'000);
    b.record(1ull << 50);  // beyond the last bucket: clamped, max kept exact
    a.merge(b);
    EXPECT_EQ(a.count(), 3u);
    EXPECT_EQ(a.min(), 10u);
    EXPECT_EQ(a.max(), 1ull << 50);
    EXPECT_EQ(a.percentile(100), 1ull << 50);
}
