#include "broker/common/periodic_timers.hpp"

#include <algorithm>

namespace wharf {

periodic_timers::periodic_timers() : thread_([this] { run(); }) {}

periodic_timers::~periodic_timers() {
    {
        std::lock_guard l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

periodic_timers::id periodic_timers::add(std::chrono::milliseconds period, std::function<void()> fn) {
    period = std::max(period, std::chrono::milliseconds(1));
    std::lock_guard l(mu_);
    const id t = next_++;
    timers_.emplace(t, timer{period, clock::now() + period, std::move(fn)});
    cv_.notify_all();
    return t;
}

void periodic_timers::cancel(id t) {
    std::unique_lock l(mu_);
    timers_.erase(t);
    if (std::this_thread::get_id() == thread_id_) return; // from a timer function
    cv_.wait(l, [&] { return running_ != t; });
}

void periodic_timers::run() {
    std::unique_lock l(mu_);
    thread_id_ = std::this_thread::get_id();
    while (!stop_) {
        auto next = timers_.end();
        for (auto it = timers_.begin(); it != timers_.end(); ++it)
            if (next == timers_.end() || it->second.due < next->second.due) next = it;
        if (next == timers_.end()) {
            cv_.wait(l);
            continue;
        }
        if (clock::now() < next->second.due) {
            const clock::time_point due = next->second.due; // a copy: the entry may go meanwhile
            cv_.wait_until(l, due);
            continue; // the set may have changed: look again
        }
        const id t = next->first;
        next->second.due = clock::now() + next->second.period;
        std::function<void()> fn = next->second.fn; // a copy: cancel() may erase the entry
        running_ = t;
        l.unlock();
        fn();
        l.lock();
        running_ = 0;
        cv_.notify_all();
    }
}

} // namespace wharf
