#include "tools/wharf-bench/run_control.hpp"

#include <algorithm>

namespace wharf::bench {

run_control::run_control(const bench_options& options) : options_(options) {
    if (options.mode != bench_mode::receive || !options.count) return;
    // The budget of each queue is what `send --count N` with the same
    // --connections/--links/--queues put on it, so that a receiver never holds
    // credit for a queue that has nothing more to give while another still has.
    budgeted_ = true;
    const int queues = std::max(1, options.queues);
    budgets_ = std::make_unique<std::atomic<std::int64_t>[]>(static_cast<std::size_t>(queues));
    for (int q = 0; q < queues; ++q) budgets_[static_cast<std::size_t>(q)].store(0);
    for (int i = 0; i < options.total_links(); ++i)
        budgets_[static_cast<std::size_t>(i % queues)] += static_cast<std::int64_t>(options.share_of(*options.count, i));
}

void run_control::fail(const std::string& what) {
    std::lock_guard lock(error_mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = what;
    failed_.store(true, std::memory_order_release);
    set_stop_sending();
}

std::string run_control::error() const {
    std::lock_guard lock(error_mutex_);
    return error_;
}

std::uint32_t run_control::take_credit(int queue_index, std::uint32_t wanted) {
    if (!budgeted_) return wanted;
    auto& budget = budgets_[static_cast<std::size_t>(queue_index % std::max(1, options_.queues))];
    std::int64_t left = budget.load(std::memory_order_relaxed);
    while (left > 0) {
        const std::int64_t take = std::min<std::int64_t>(left, wanted);
        if (budget.compare_exchange_weak(left, left - take, std::memory_order_relaxed))
            return static_cast<std::uint32_t>(take);
    }
    return 0;
}

} // namespace wharf::bench
