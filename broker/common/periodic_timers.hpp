#pragma once
// periodic_timers: functions run every so often on one thread of their own
// (plugins' timers). Each timer runs at most once at a time; cancel() waits
// until its function is not running, so a caller may free what it captured
// right after.
//
// Threads: every method is thread-safe; functions run on the timer thread
// and must be quick (they delay the other timers). cancel() from inside a
// timer function cancels without waiting for itself.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace wharf {

class periodic_timers {
  public:
    using id = uint64_t;
    periodic_timers();
    ~periodic_timers(); // stops: no function runs after it returns
    periodic_timers(const periodic_timers&) = delete;
    periodic_timers& operator=(const periodic_timers&) = delete;

    // First run after one period. period must be > 0.
    id add(std::chrono::milliseconds period, std::function<void()> fn);
    void cancel(id t);

  private:
    using clock = std::chrono::steady_clock;
    struct timer {
        std::chrono::milliseconds period;
        clock::time_point due;
        std::function<void()> fn;
    };
    void run();

    std::mutex mu_;
    std::condition_variable cv_;
    std::map<id, timer> timers_;
    id next_ = 1;
    id running_ = 0;          // the timer whose function runs now (0: none)
    bool stop_ = false;
    std::thread::id thread_id_;
    std::thread thread_;      // last: starts once the rest exists
};

} // namespace wharf
