// queue_engine: what management asks of the engine (statistics, purge,
// create, delete, configure). Each runs on the engine's strand and waits for
// its answer: never on the message path.

#include "broker/engine/queue_engine.hpp"

#include <algorithm>
#include <future>
#include <unordered_map>

namespace wharf::engine {

std::vector<queue_stats> queue_engine::stats() {
    auto done = std::make_shared<std::promise<std::vector<queue_stats>>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done] {
        std::unordered_map<const queue*, uint64_t> client_links, producers;
        for (const auto& [id, c] : consumers_)
            if (!is_internal(id) && !c->leaving) ++client_links[c->q];
        for (const auto& [id, p] : producers_)
            if (p.q != nullptr) {
                ++client_links[p.q];
                ++producers[p.q];
            }
        std::vector<queue_stats> out;
        out.reserve(queues_.size());
        for (const auto& [name, q] : queues_) {
            auto l = client_links.find(q.get());
            auto p = producers.find(q.get());
            out.push_back({name, q->depth(), q->depth_bytes(), q->consumer_count(), q->dynamic(),
                           q->counters(), l == client_links.end() ? 0 : l->second,
                           p == producers.end() ? 0 : p->second, q->policy()});
        }
        done->set_value(std::move(out));
    })});
    return fut.get();
}

queue_engine::totals_t queue_engine::totals() {
    auto done = std::make_shared<std::promise<totals_t>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done] {
        totals_t t;
        for (const auto& [name, q] : queues_) {
            if (q->dynamic()) continue;
            ++t.queues;
            t.messages += q->depth();
        }
        done->set_value(t);
    })});
    return fut.get();
}

std::optional<uint64_t> queue_engine::purge(const std::string& name) {
    auto done = std::make_shared<std::promise<std::optional<uint64_t>>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done, name] {
        auto it = queues_.find(name);
        if (it == queues_.end()) return done->set_value(std::nullopt);
        queue& q = *it->second;
        auto gone = q.take_all();
        for (const auto& e : gone) forget_stored(q, e);
        touch(&q); // the run's end lets producers waiting for room go on
        done->set_value(gone.size());
    })});
    return fut.get();
}

bool queue_engine::remove(const std::string& name) {
    auto done = std::make_shared<std::promise<bool>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done, name] {
        auto it = queues_.find(name);
        if (it == queues_.end()) return done->set_value(false);
        queue* q = it->second.get();
        // Messages out for delivery go too (and leave the store).
        for (auto& [id, c] : consumers_)
            if (c->q == q)
                c->acquired.for_each([&](const queue_entry& e) { forget_stored(*q, e); });
        touched_.erase(std::remove(touched_.begin(), touched_.end(), q), touched_.end());
        doomed_.erase(std::remove(doomed_.begin(), doomed_.end(), q), doomed_.end());
        delete_queue(q);
        done->set_value(true);
    })});
    return fut.get();
}

bool queue_engine::has_queue(const std::string& name) {
    auto done = std::make_shared<std::promise<bool>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done, name] { done->set_value(queues_.count(name) != 0); })});
    return fut.get();
}

bool queue_engine::create(const std::string& name) {
    auto done = std::make_shared<std::promise<bool>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done, name] {
        if (queues_.count(name)) return done->set_value(false);
        create_queue(name, false);
        done->set_value(true);
    })});
    return fut.get();
}

std::optional<config::queue_policy> queue_engine::configure(
    const std::string& name, const std::function<void(config::queue_policy&)>& change) {
    auto done = std::make_shared<std::promise<std::optional<config::queue_policy>>>();
    auto fut = done->get_future();
    post(cmd_run{std::make_shared<std::function<void()>>([this, done, name, &change] {
        auto it = queues_.find(name);
        if (it == queues_.end()) return done->set_value(std::nullopt);
        queue& q = *it->second;
        config::queue_policy p = q.policy();
        const bool durable = p.durable;
        change(p);
        p.durable = durable; // stored messages were written under it
        q.set_policy(p);
        touch(&q); // the run's end lets producers waiting for room go on
        done->set_value(p);
    })});
    return fut.get();
}

} // namespace wharf::engine
