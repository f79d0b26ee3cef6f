// periodic_timers: functions run again and again until cancelled, and
// never after cancel() or the destructor returned.
#include "broker/common/periodic_timers.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace wharf {
namespace {

using namespace std::chrono_literals;

// Polls `cond` until it holds or the deadline passes.
template <class F> bool eventually(F cond, std::chrono::milliseconds limit = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (cond()) return true;
        std::this_thread::yield();
    }
    return cond();
}

TEST(periodic_timers, a_timer_runs_repeatedly_until_cancelled) {
    periodic_timers timers;
    std::atomic<int> runs{0};
    auto t = timers.add(5ms, [&] { ++runs; });
    EXPECT_TRUE(eventually([&] { return runs.load() >= 3; }));
    timers.cancel(t);
    const int after_cancel = runs.load();
    // Another timer's runs prove the thread kept going while t stayed silent.
    std::atomic<int> other{0};
    timers.add(1ms, [&] { ++other; });
    EXPECT_TRUE(eventually([&] { return other.load() >= 5; }));
    EXPECT_EQ(runs.load(), after_cancel);
}

TEST(periodic_timers, cancel_waits_for_a_running_function) {
    periodic_timers timers;
    std::atomic<bool> inside{false}, release{false}, finished{false};
    auto t = timers.add(1ms, [&] {
        inside = true;
        while (!release) std::this_thread::yield();
        finished = true;
    });
    ASSERT_TRUE(eventually([&] { return inside.load(); }));
    std::thread releaser([&] { release = true; });
    timers.cancel(t);
    EXPECT_TRUE(finished.load()); // cancel returned only after the function ended
    releaser.join();
}

TEST(periodic_timers, a_timer_may_cancel_itself) {
    periodic_timers timers;
    std::atomic<int> runs{0};
    std::atomic<periodic_timers::id> self{0};
    self = timers.add(1ms, [&] {
        if (self.load() == 0) return; // ran before add() returned: not yet known
        ++runs;
        timers.cancel(self.load());
    });
    std::atomic<int> other{0};
    timers.add(1ms, [&] { ++other; });
    EXPECT_TRUE(eventually([&] { return other.load() >= 10; }));
    EXPECT_EQ(runs.load(), 1);
}

} // namespace
} // namespace wharf
