#include "broker/engine/queue.hpp"

#include "broker/amqp/selector.hpp"

#include <algorithm>

namespace wharf::engine {

bool consumer::selects(const queue_entry& e) const {
    return selector == nullptr ||
           selector->matches(e.body.bytes(), {.delivery_count = e.delivery_count, .expiry_ms = e.expiry_ms});
}

bool queue_entry::excludes(link_id l) const {
    return excluded && std::find(excluded->begin(), excluded->end(), l) != excluded->end();
}

void acquired_list::add(queue_entry&& e) {
    ++live_;
    if (slots_.empty() || slots_.back().e.seq < e.seq) {
        slots_.push_back({std::move(e), true});
        return;
    }
    // A redelivered message older than what this consumer holds.
    auto at = std::lower_bound(slots_.begin(), slots_.end(), e.seq,
                               [](const slot& x, uint64_t s) { return x.e.seq < s; });
    slots_.insert(at, {std::move(e), true});
}

bool acquired_list::take(uint64_t seq, queue_entry& out) {
    if (slots_.empty()) return false;
    size_t i = 0;
    if (slots_.front().e.seq != seq) { // in order is the usual case
        auto at = std::lower_bound(slots_.begin(), slots_.end(), seq,
                                   [](const slot& x, uint64_t s) { return x.e.seq < s; });
        if (at == slots_.end() || at->e.seq != seq) return false;
        i = static_cast<size_t>(at - slots_.begin());
    }
    slot& s = slots_[i];
    if (!s.live) return false;
    out = std::move(s.e);
    s.live = false;
    s.e.body = message_ref();
    s.e.excluded.reset();
    --live_;
    trim();
    return true;
}

void acquired_list::trim() {
    while (!slots_.empty() && !slots_.front().live) slots_.pop_front();
    while (!slots_.empty() && !slots_.back().live) slots_.pop_back();
    // Holes between messages held long (a client that settles around one
    // it keeps): compact once they outnumber what is held.
    const size_t holes = slots_.size() - live_;
    if (holes > 64 && holes > live_) {
        std::deque<slot> kept;
        for (auto& s : slots_)
            if (s.live) kept.push_back(std::move(s));
        slots_.swap(kept);
    }
}

std::vector<queue_entry> acquired_list::take_all() {
    std::vector<queue_entry> out;
    out.reserve(live_);
    for (auto& s : slots_)
        if (s.live) out.push_back(std::move(s.e));
    slots_.clear();
    live_ = 0;
    return out;
}

queue::queue(std::string name, config::queue_policy policy, bool dynamic)
    : name_(std::move(name)), policy_(std::move(policy)), dynamic_(dynamic) {}

bool queue::full(size_t next_size) const {
    if (policy_.max_depth_messages != 0 && depth_ >= policy_.max_depth_messages) return true;
    return policy_.max_depth_bytes != 0 && depth_bytes_ + next_size > policy_.max_depth_bytes;
}

void queue::enqueue(queue_entry&& e) {
    e.seq = next_seq_++;
    ++depth_;
    depth_bytes_ += e.body.size();
    if (e.expiry_ms != 0) ++expiring_;
    ++counters_.enqueued;
    available_.push_back(std::move(e));
}

void queue::load(queue_entry&& e) {
    if (e.seq >= next_seq_) next_seq_ = e.seq + 1;
    ++depth_;
    depth_bytes_ += e.body.size();
    ++counters_.enqueued;
    restore(std::move(e)); // counts it as expiring, if it is
}

void queue::restore(queue_entry&& e) {
    if (e.expiry_ms != 0) ++expiring_;
    // A message a selecting consumer selects, put back in front of where it
    // found nothing to select, is offered to it again.
    if (selecting_ != 0)
        for (consumer* c : consumers_)
            if (c->selector != nullptr && e.seq < c->select_from && !e.excludes(c->id) && c->selects(e))
                c->select_from = e.seq;
    if (available_.empty() || available_.back().seq < e.seq) {
        available_.push_back(std::move(e));
        return;
    }
    auto at = std::lower_bound(available_.begin(), available_.end(), e.seq,
                               [](const queue_entry& x, uint64_t s) { return x.seq < s; });
    available_.insert(at, std::move(e));
}

void queue::forget(const queue_entry& e) {
    --depth_;
    depth_bytes_ -= e.body.size();
}

void queue::replace_body(queue_entry& e, message_ref body) {
    depth_bytes_ = depth_bytes_ - e.body.size() + body.size();
    e.body = std::move(body);
}

void queue::add_consumer(consumer* c) {
    consumers_.push_back(c);
    if (c->selector != nullptr) ++selecting_;
}

void queue::remove_consumer(consumer* c) {
    auto it = std::find(consumers_.begin(), consumers_.end(), c);
    if (it == consumers_.end()) return;
    if (c->selector != nullptr) --selecting_;
    consumers_.erase(it);
    if (next_consumer_ >= consumers_.size()) next_consumer_ = 0;
}

bool queue::serve_one(consumer& c, int64_t now_ms, dispatch_sink& sink) {
    size_t start = 0;
    if (c.selector != nullptr && c.select_from != 0)
        start = static_cast<size_t>(std::lower_bound(available_.begin(), available_.end(), c.select_from,
                                                     [](const queue_entry& x, uint64_t s) { return x.seq < s; }) -
                                    available_.begin());
    for (size_t i = start; i < available_.size();) {
        queue_entry& head = available_[i];
        const bool expired = head.expired(now_ms);
        if (!expired && (head.excludes(c.id) || !c.selects(head))) {
            if (c.selector != nullptr) c.select_from = head.seq + 1;
            ++i;
            continue;
        }
        queue_entry e = std::move(head);
        if (i == 0) available_.pop_front();
        else available_.erase(available_.begin() + static_cast<std::ptrdiff_t>(i));
        if (e.expiry_ms != 0 && expiring_ > 0) --expiring_;
        if (expired) {
            forget(e);
            ++counters_.expired;
            sink.expired(*this, std::move(e));
            continue;
        }
        ++c.assigned;
        ++counters_.delivered;
        // Pre-settled too: held until the connection says it sent it, so
        // that a message it could not send (no credit, the link ended)
        // comes back rather than being lost.
        sink.deliver(c, e, c.settle_on_send);
        c.acquired.add(std::move(e));
        return true;
    }
    return false;
}

void queue::serve_browser(consumer& c, int64_t now_ms, dispatch_sink& sink) {
    auto it = std::upper_bound(available_.begin(), available_.end(), c.browse_cursor,
                               [](uint64_t s, const queue_entry& x) { return s < x.seq; });
    for (; it != available_.end() && c.credit() > 0; ++it) {
        if (it->expired(now_ms)) continue;
        if (it->excludes(c.id) || !c.selects(*it)) {
            c.browse_cursor = it->seq; // never to be shown: not read again
            continue;
        }
        ++c.assigned;
        c.browse_cursor = it->seq;
        sink.deliver(c, *it, true);
    }
}

void queue::dispatch(int64_t now_ms, dispatch_sink& sink) {
    if (consumers_.empty()) return;
    for (consumer* c : consumers_)
        if (c->browse && c->credit() > 0) serve_browser(*c, now_ms, sink);

    const size_t n = consumers_.size();
    bool progress = true;
    while (progress && !available_.empty()) {
        progress = false;
        for (size_t k = 0; k < n; ++k) {
            const size_t idx = (next_consumer_ + k) % n;
            consumer* c = consumers_[idx];
            if (c->browse || c->credit() == 0) continue;
            if (serve_one(*c, now_ms, sink)) {
                next_consumer_ = (idx + 1) % n;
                progress = true;
                break;
            }
        }
    }
    // Whoever still has credit now has nothing left to take.
    for (consumer* c : consumers_) {
        if (c->drain && c->credit() > 0) {
            c->limit = c->assigned;
            sink.drained(*c);
        }
    }
}

size_t queue::expire(int64_t now_ms, dispatch_sink& sink) {
    if (expiring_ == 0) return 0;
    if (std::none_of(available_.begin(), available_.end(),
                     [now_ms](const queue_entry& e) { return e.expired(now_ms); }))
        return 0;
    std::deque<queue_entry> keep;
    std::vector<queue_entry> gone;
    uint64_t expiring = 0;
    for (auto& e : available_) {
        if (e.expired(now_ms)) {
            gone.push_back(std::move(e));
        } else {
            if (e.expiry_ms != 0) ++expiring;
            keep.push_back(std::move(e));
        }
    }
    available_.swap(keep);
    expiring_ = expiring;
    for (auto& e : gone) {
        forget(e);
        ++counters_.expired;
        sink.expired(*this, std::move(e));
    }
    return gone.size();
}

std::deque<queue_entry> queue::take_all() {
    std::deque<queue_entry> all;
    all.swap(available_);
    for (const auto& e : all) forget(e);
    expiring_ = 0;
    return all;
}

} // namespace wharf::engine
