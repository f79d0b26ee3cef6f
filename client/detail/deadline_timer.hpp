#pragma once
// deadline_timer: runs callbacks at their deadlines on a thread of its own.
// The client's attach/open time-outs use it: Proton's own timers
// (container::schedule) keep container::run() going until they fire, and a
// connection that never opens has no thread of its own to run one on.
//
// Owned by client_state; the thread starts with the first add() and is
// joined by the destructor (pending callbacks are dropped). add() may be
// called from any thread. Callbacks run on the timer's thread, one at a
// time, without its lock held; they must not destroy the timer.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace wharf::client::detail {

class deadline_timer {
  public:
    using clock = std::chrono::steady_clock;

    deadline_timer() = default;
    ~deadline_timer() {
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    deadline_timer(const deadline_timer&) = delete;
    deadline_timer& operator=(const deadline_timer&) = delete;

    void add(clock::time_point at, std::function<void()> f) {
        {
            std::lock_guard lock(mu_);
            if (stopping_) return;
            due_.emplace(at, std::move(f));
            if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        }
        cv_.notify_all();
    }

  private:
    void run() {
        std::unique_lock lock(mu_);
        while (!stopping_) {
            if (due_.empty()) {
                cv_.wait(lock);
                continue;
            }
            const auto next = due_.begin()->first;
            if (clock::now() < next) {
                cv_.wait_until(lock, next);
                continue;
            }
            auto f = std::move(due_.begin()->second);
            due_.erase(due_.begin());
            lock.unlock();
            f();
            lock.lock();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::multimap<clock::time_point, std::function<void()>> due_;
    bool stopping_ = false;
    std::thread thread_;
};

} // namespace wharf::client::detail
