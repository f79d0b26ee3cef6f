#include "broker/common/fifo.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>

namespace wharf {
namespace {

TEST(fifo, gives_back_in_the_order_given_across_fills_and_partial_drains) {
    // Against std::deque as the reference: random runs of pushes and pops,
    // long enough to cross the compaction threshold many times.
    fifo<std::string> f;
    std::deque<std::string> ref;
    std::mt19937 rng(7);
    int next = 0;
    for (int step = 0; step < 20000; ++step) {
        const bool push = ref.empty() || rng() % 100 < 52;
        if (push) {
            const int n = 1 + static_cast<int>(rng() % 50);
            for (int i = 0; i < n; ++i) {
                f.push_back(std::to_string(next));
                ref.push_back(std::to_string(next));
                ++next;
            }
        } else {
            const size_t n = 1 + rng() % ref.size();
            for (size_t i = 0; i < n; ++i) {
                ASSERT_FALSE(f.empty());
                ASSERT_EQ(f.front(), ref.front()) << "step " << step;
                f.pop_front();
                ref.pop_front();
            }
        }
        ASSERT_EQ(f.size(), ref.size());
        ASSERT_EQ(f.empty(), ref.empty());
    }
}

TEST(fifo, clear_empties_it_and_it_fills_again) {
    fifo<int> f;
    for (int i = 0; i < 100; ++i) f.push_back(i);
    f.pop_front();
    f.clear();
    EXPECT_TRUE(f.empty());
    EXPECT_EQ(f.size(), 0u);
    f.push_back(42);
    EXPECT_EQ(f.front(), 42);
}

} // namespace
} // namespace wharf
