#include "tools/wharf-bench/histogram.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

using wharf::bench::latency_histogram;
using wharf::bench::thread_histograms;

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

TEST(thread_histograms, records_from_every_thread_are_merged) {
    thread_histograms h;
    h.record(100);
    std::thread other([&h] {
        for (int i = 0; i < 1000; ++i) h.record(5'000);
        h.record(7'000'000);
    });
    other.join();
    h.record(200);
    const latency_histogram all = h.merged();
    EXPECT_EQ(all.count(), 1003u);
    EXPECT_EQ(all.min(), 100u);
    EXPECT_EQ(all.max(), 7'000'000u);
    EXPECT_LE(all.percentile(50), 5'000u * 65 / 64);
    EXPECT_GE(all.percentile(50), 5'000u);
}

TEST(thread_histograms, two_sets_on_one_thread_stay_apart) {
    thread_histograms accept, e2e;
    accept.record(10);
    e2e.record(20);
    e2e.record(30);
    EXPECT_EQ(accept.merged().count(), 1u);
    EXPECT_EQ(e2e.merged().count(), 2u);
    EXPECT_EQ(e2e.merged().min(), 20u);
    {
        thread_histograms gone;  // a set destroyed before a new one is made must not be reused
        gone.record(1);
    }
    thread_histograms fresh;
    EXPECT_EQ(fresh.merged().count(), 0u);
    fresh.record(40);
    EXPECT_EQ(fresh.merged().count(), 1u);
    EXPECT_EQ(fresh.merged().min(), 40u);
}
