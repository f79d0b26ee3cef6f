#pragma once
// credit_pool: the producer credit that the links of one client connection
// may hold together, handed out in turns.
//
// Without it, what is in flight towards a node grows with the number of
// producer links: each keeps at least credit_budget's floor (20), so 1,000
// producers on one connection hold 20,000 messages' worth and 10,000 hold
// 200,000. Each of those messages is a Proton delivery and a body at both
// ends; once that outgrows the caches every message is touched cold (see
// docs/benchmarks.md, "Producer credit in turns"). With a pool, a
// connection's producers hold at most `total` credits between them: a link
// that wants more while the pool is spent waits in line, and the credit its
// neighbours use comes back to the pool and goes to the link at the front.
//
// The pool is the connection's budget, or less while many connections have
// pools: the node's producer-credit-budget is shared among them
// (credit_budget::pool_part; set_total), so the node as a whole holds about
// that budget, not connections x budget.
//
// A link holds at most its even part of the pool (never less than `chunk`),
// so links that stay idle hold little. Credit that a link holds but does not
// use still counts, and could keep the line waiting for good. While links
// wait, the server ticks every 10 ms (tick_requests), and at each tick the
// pool stops counting (forgives; the client keeps it):
// - what a link holds beyond its even part now: links granted a large
//   window while the connection had few producers must not keep newer ones
//   waiting (three producers, two of them idle with 1,000 each: the third
//   gets its 666 at the next tick);
// - all a link holds once the others have used two rounds since it last
//   used any, a round being the pool or, with more links than it has turns
//   for, a turn for every link (it was passed over twice: idle, not slow);
// - all a link holds once it has used none for `stuck_ticks` (500 ms) while
//   no credit at all came back to the pool (the line is stuck: links that
//   finished a burst hold the rest).
// A holder within its even part is not forgiven by time alone while credit
// comes back: a slow client with many links can take a second to use its
// turn on each, and forgiving them then would let what is in flight grow
// with the links again (measured: with 10,000 producers on 10 connections,
// rules of 30 ms, 50 ms and 1 s, and of two rounds of the pool alone with
// 200 ms for a stuck line, let the credit grow back to the no-pool level on
// a busy machine in some runs).
// Forgiving is never wrong, only generous: a forgiven link that sends after
// all puts the connection over its budget by what it held.
//
// A tick walks only the links that hold credit: at 10,000 producers on 10
// connections at most a pool's worth of turns (100) a connection, not its
// 1,000 links, 100 times a second (measured: the walk over every link was
// 9 % of wharfd's CPU there).
//
// Threads: the connection's only.

#include "broker/common/fifo.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace wharf::server {

class credit_pool {
  public:
    static constexpr int64_t default_chunk = 20;
    static constexpr uint8_t stuck_ticks = 50;

    // What one link holds of the pool. The pool lists it by address while
    // it holds credit, so it does not move, and leave() must come before
    // it is freed.
    struct share {
        share() = default;
        share(const share&) = delete;
        share& operator=(const share&) = delete;

        int64_t held = 0;     // credit granted from the pool, not yet seen used
        bool waiting = false; // in the line
        bool used = false;    // used some credit since the last tick
        uint8_t idle = 0;     // ticks in a row without using any while holding (at most stuck_ticks)
        uint64_t mark = 0;    // the pool's returned_ when it last used any
        bool joined = false;
        size_t slot = 0;      // 1 + its index in holders_; 0: holds nothing
    };

    // total 0: no pool (grant() gives what is asked).
    explicit credit_pool(uint64_t total, int64_t chunk = default_chunk)
        : total_(static_cast<int64_t>(total)), chunk_(std::min<int64_t>(chunk, std::max<int64_t>(1, total_))) {}

    bool enabled() const { return total_ != 0; }
    int64_t total() const { return total_; }
    int64_t links() const { return links_; }
    // The pool's size now (the node's budget shares it among connections:
    // credit_budget::pool_part), never below a chunk. When it shrinks below
    // what is out, nothing more is granted until enough is used; a tick
    // forgives what links hold beyond their new even part.
    void set_total(int64_t total) {
        if (enabled()) total_ = std::max(chunk_, total);
    }
    int64_t outstanding() const { return out_; }
    size_t waiting() const { return line_.size(); }

    void join(share& s) {
        if (!s.joined) ++links_;
        s.joined = true;
    }
    // The link is gone: what it held goes back.
    void leave(share& s) {
        if (s.joined) --links_;
        out_ -= s.held;
        set_held(s, 0);
        s.joined = s.waiting = s.used = false;
        s.idle = 0;
        s.mark = 0;
    }

    // The most one link may hold: `cap`, or its even part of the pool, at
    // least `chunk`.
    int64_t window(int64_t cap) const {
        if (!enabled()) return cap;
        return std::min(cap, std::max(chunk_, total_ / std::max<int64_t>(1, links_)));
    }

    // The link holds `credit` now (Proton's count): what it used since the
    // last call goes back to the pool.
    void holds(share& s, int64_t credit) {
        credit = std::max<int64_t>(0, credit);
        if (s.held > credit) {
            out_ -= s.held - credit;
            returned_ += static_cast<uint64_t>(s.held - credit);
            set_held(s, credit);
            s.used = true;
            s.mark = returned_;
        }
    }

    // Up to `want` credits for the link `id`; returns how many it gets.
    // 0: it waits in line (at most once) until next() names it. `turn`:
    // next() named it, so it goes ahead of the line.
    int64_t grant(share& s, uint64_t id, int64_t want, bool turn = false) {
        if (want <= 0) return 0;
        if (!enabled()) return want;
        int64_t give = 0;
        if (turn || line_.empty()) {
            const int64_t left = total_ - out_;
            if (left >= std::min(want, chunk_)) give = std::min(want, left);
        }
        if (give > 0) {
            if (s.held == 0) s.mark = returned_; // its turn starts now
            out_ += give;
            set_held(s, s.held + give);
            return give;
        }
        if (!s.waiting) {
            s.waiting = true;
            line_.push_back(id);
        }
        return 0;
    }

    // The next link in line, if the pool has room for it (it is taken out of
    // the line; call grant() with turn = true for it). 0: none.
    uint64_t next() {
        if (line_.empty() || total_ - out_ < chunk_) return 0;
        const uint64_t id = line_.front();
        line_.pop_front();
        return id;
    }
    // A link next() named has left the line (found or not).
    static void served(share& s) { s.waiting = false; }

    // A tick, with `part` a link's even part now (window()): for each link
    // that holds credit, what it holds beyond that stops counting, and all
    // of it once it was passed over twice, or has used none for stuck_ticks
    // while nothing came back. It may still use it (the client has it).
    void tick(int64_t part) {
        quiet_ = returned_ == returned_at_tick_ ? static_cast<uint8_t>(std::min<int>(quiet_ + 1, stuck_ticks)) : 0;
        returned_at_tick_ = returned_;
        // Passed over twice: two rounds of the pool, or of a turn for every
        // link when there are more links than turns.
        const auto round = static_cast<uint64_t>(std::max(total_, links_ * chunk_));
        // Backwards: a holder that lets go is swapped with the last, which
        // was ticked already.
        for (size_t i = holders_.size(); i-- > 0;) {
            share& s = *holders_[i];
            s.idle = s.used ? 0 : static_cast<uint8_t>(std::min<int>(s.idle + 1, stuck_ticks));
            s.used = false;
            const bool idle = returned_ - s.mark >= 2 * round || (quiet_ >= stuck_ticks && s.idle >= stuck_ticks);
            const int64_t keep = idle ? 0 : std::max<int64_t>(0, part);
            if (s.held > keep) {
                out_ -= s.held - keep;
                set_held(s, keep);
            }
        }
    }
    size_t holders() const { return holders_.size(); }

  private:
    int64_t total_;
    const int64_t chunk_;
    int64_t out_ = 0;
    int64_t links_ = 0;
    uint64_t returned_ = 0;         // credit seen used, ever
    uint64_t returned_at_tick_ = 0;
    uint8_t quiet_ = 0;             // ticks in a row with nothing back
    fifo<uint64_t> line_;
    std::vector<share*> holders_; // the links with held > 0

    // A link starts holding (its idle count starts then) or lets go.
    void set_held(share& s, int64_t held) {
        if (s.slot == 0 && held > 0) {
            holders_.push_back(&s);
            s.slot = holders_.size();
            s.idle = 0;
            s.used = false;
        } else if (s.slot != 0 && held <= 0) {
            share* last = holders_.back();
            holders_[s.slot - 1] = last;
            last->slot = s.slot;
            holders_.pop_back();
            s.slot = 0;
        }
        s.held = held;
    }
};

} // namespace wharf::server
