#pragma once
// per_thread<T>: one T for each thread that uses it, made on that thread's
// first local() call and kept until the per_thread is destroyed. A writer
// touches only its own T, so no two threads write one cache line; a reader
// visits every T with for_each() — after the writers stopped, or while they
// run when T's fields are atomics.
//
// What a benchmark thread records (counters, latency) is kept this way and
// not per link: with 20,000 links, per-link state made every record a cache
// miss, and summing it every 10 ms walked 20,000 lines the container
// threads were writing.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace wharf::bench {

namespace detail {
struct per_thread_slot {
    std::uint64_t owner;
    void* object;
};
// A thread uses a few sets at most (counters, two histograms): a short list
// is the quickest lookup.
inline thread_local std::vector<per_thread_slot> per_thread_cache;
inline std::atomic<std::uint64_t> per_thread_next_id{1};
} // namespace detail

template <class T>
class per_thread {
public:
    per_thread() : id_(detail::per_thread_next_id.fetch_add(1, std::memory_order_relaxed)) {}
    per_thread(const per_thread&) = delete;
    per_thread& operator=(const per_thread&) = delete;

    // The calling thread's T.
    T& local() {
        for (const auto& s : detail::per_thread_cache)
            if (s.owner == id_) return *static_cast<T*>(s.object);
        auto made = std::make_unique<T>();
        T* t = made.get();
        {
            std::lock_guard lock(mu_);
            all_.push_back(std::move(made));
        }
        detail::per_thread_cache.push_back({id_, t});
        return *t;
    }

    template <class F>
    void for_each(F&& f) const {
        std::lock_guard lock(mu_);
        for (const auto& t : all_) f(static_cast<const T&>(*t));
    }

private:
    const std::uint64_t id_; // unique per instance: threads cache by it, not by address
    mutable std::mutex mu_;
    std::vector<std::unique_ptr<T>> all_;
};

} // namespace wharf::bench
