#include "tools/wharf-bench/run_control.hpp"

#include <algorithm>
#include <random>

namespace wharf::bench {

namespace {

std::uint64_t random_run_id() {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ now_ns();
}

} // namespace

run_control::run_control(const bench_options& options) : options_(options), run_id_(random_run_id()) {
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

run_totals run_control::totals() const {
    run_totals t;
    counters_.for_each([&](const link_counters& c) {
        t.sent += c.sent.load(std::memory_order_relaxed);
        t.settled += c.settled.load(std::memory_order_relaxed);
        t.accepted += c.accepted.load(std::memory_order_relaxed);
        t.rejected += c.rejected.load(std::memory_order_relaxed);
        t.released += c.released.load(std::memory_order_relaxed);
        t.received += c.received.load(std::memory_order_relaxed);
        t.foreign += c.foreign.load(std::memory_order_relaxed);
    });
    return t;
}

std::uint64_t run_control::last_progress_ns() const {
    std::uint64_t last = 0;
    counters_.for_each([&](const link_counters& c) {
        last = std::max(last, c.last_progress_ns.load(std::memory_order_relaxed));
    });
    return last;
}

void run_control::link_attached(bool sender, std::uint64_t at_ns) {
    std::uint64_t seen = last_attach_ns_.load(std::memory_order_relaxed);
    while (seen < at_ns && !last_attach_ns_.compare_exchange_weak(seen, at_ns, std::memory_order_acq_rel)) {
    }
    (sender ? senders_attached_ : receivers_attached_).fetch_add(1, std::memory_order_acq_rel);
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
