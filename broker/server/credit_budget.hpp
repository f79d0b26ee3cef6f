#pragma once
// credit_budget: how many messages all the producer links of one kind may
// have in flight towards this node at once, shared out evenly. A link gets
// its usual window while few are open; with many open each gets
// total / links, never less than `floor`. Without a budget, 1,000 producers
// with 1,000 credits each put a million messages in flight: the client
// works through that backlog before it reads its newer links' attaches, and
// what it sent piles up in the node faster than consumers can take it.
//
// The same budget bounds the connections' credit pools (credit_pool.hpp):
// each connection whose producers share a pool may hold an even share of
// it (pool_part), at most its own connection budget and at least the
// floor. Without that, the per-link floor let 100 connections of 100
// producers hold 100 x 2,000 = 200,000 credits, ten times the budget.
//
// Threads: a share is taken and dropped on a connection's thread; window()
// and pool_part() are read on any. The counts are atomics: shares are taken
// on attach and dropped on detach, never per message.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

namespace wharf::server {

class credit_budget {
  public:
    static constexpr uint64_t default_floor = 20;
    // total 0: no budget (window() is always the cap).
    explicit credit_budget(uint64_t total, uint64_t floor = default_floor) : total_(total), floor_(floor) {}

    // What a share counts: an open producer link, or a connection whose
    // producers share a credit pool.
    enum class kind { link, pool };

    // One place in the budget: it counts while held. Move-only; a
    // default-built one counts nothing.
    class share {
      public:
        share() = default;
        explicit share(credit_budget& b, kind k = kind::link) : n_(k == kind::link ? &b.links_ : &b.pools_) {
            n_->fetch_add(1, std::memory_order_relaxed);
        }
        share(share&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
        share& operator=(share&& o) noexcept {
            if (this != &o) {
                release();
                n_ = std::exchange(o.n_, nullptr);
            }
            return *this;
        }
        share(const share&) = delete;
        share& operator=(const share&) = delete;
        ~share() { release(); }
        void release() {
            if (n_ != nullptr) n_->fetch_sub(1, std::memory_order_relaxed);
            n_ = nullptr;
        }
        bool held() const { return n_ != nullptr; }

      private:
        std::atomic<uint64_t>* n_ = nullptr;
    };

    // The credit one link may hold now: at most `cap`, an even share of the
    // budget, at least the floor (but never more than cap).
    uint64_t window(uint64_t cap) const {
        if (total_ == 0) return cap;
        const uint64_t n = std::max<uint64_t>(1, links_.load(std::memory_order_relaxed));
        return std::min(cap, std::max(floor_, total_ / n));
    }
    uint64_t links() const { return links_.load(std::memory_order_relaxed); }

    // The credit one connection's pool may hold now: at most
    // `connection_budget`, an even share of the budget among the pooled
    // connections, at least the floor (but never more than
    // connection_budget).
    uint64_t pool_part(uint64_t connection_budget) const {
        if (total_ == 0) return connection_budget;
        const uint64_t n = std::max<uint64_t>(1, pools_.load(std::memory_order_relaxed));
        return std::min(connection_budget, std::max(floor_, total_ / n));
    }
    uint64_t pools() const { return pools_.load(std::memory_order_relaxed); }

  private:
    const uint64_t total_;
    const uint64_t floor_;
    std::atomic<uint64_t> links_{0};
    std::atomic<uint64_t> pools_{0};
};

} // namespace wharf::server
