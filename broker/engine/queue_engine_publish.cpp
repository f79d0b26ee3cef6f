// queue_engine: the producer side — publishing in order, the block policy's
// waiting messages, and answers that wait for the store's sync.

#include "broker/engine/queue_engine.hpp"

#include <algorithm>

namespace wharf::engine {

void queue_engine::handle(cmd_publish& c) {
    auto it = producers_.find(c.link);
    if (it == producers_.end()) return; // the link is gone; nobody waits for outcomes
    producer& p = it->second;
    for (auto& m : c.messages) p.backlog.push_back(std::move(m));
    drain_backlog(p);
}

// Publishes the producer's messages in order until one finds its queue full
// (block policy); answers for those done, and tells the connection whether
// to keep granting credit.
void queue_engine::drain_backlog(producer& p) {
    ev_published result{p.id, 0, {}};
    const int64_t t = now();
    queue* full_queue = nullptr;
    std::vector<uint32_t> stored;
    while (!p.backlog.empty()) {
        publish_step step = publish_one(p, p.backlog.front(), t);
        if (step.stored) stored.push_back(result.count);
        if (step.kind == publish_step::full) {
            full_queue = step.full_queue;
            break;
        }
        if (step.kind == publish_step::failed) result.failures.push_back({result.count, std::move(step.err)});
        ++result.count;
        p.backlog.pop_front();
    }
    if (result.count > 0) answer(p, std::move(result), std::move(stored));
    set_blocked(p, full_queue);
}

// "accepted" means stored: an answer covering a persistent message waits for
// the store's sync, and so does every later answer to the same producer.
void queue_engine::answer(producer& p, ev_published&& ev, std::vector<uint32_t>&& stored) {
    if (stored.empty() && p.unsynced == 0) {
        stage(p.out, std::move(ev));
        return;
    }
    ++p.unsynced;
    this_run_.push_back({0, p.out, std::move(ev), std::move(stored)});
}

void queue_engine::handle(cmd_synced& c) {
    while (!waiting_.empty() && waiting_.front().epoch <= c.epoch) {
        waiting_publish w = std::move(waiting_.front());
        waiting_.pop_front();
        if (!c.ok && !w.stored.empty()) {
            // The durable messages of this answer are not known to be on
            // disk: refuse them. (They stay queued, and the store writes them
            // when it can again: the producer may send them again, and a
            // consumer may see them twice.) Messages the store had no part in
            // are queued as they were and stay accepted.
            std::vector<publish_failure> all;
            size_t next = 0;
            size_t next_stored = 0;
            for (uint32_t i = 0; i < w.ev.count; ++i) {
                if (next < w.ev.failures.size() && w.ev.failures[next].index == i) {
                    all.push_back(std::move(w.ev.failures[next++]));
                } else if (next_stored < w.stored.size() && w.stored[next_stored] == i) {
                    all.push_back({i, {errc::resource_limit_exceeded,
                                       "the node could not store the message: " + c.reason}});
                }
                if (next_stored < w.stored.size() && w.stored[next_stored] == i) ++next_stored;
            }
            w.ev.failures = std::move(all);
        }
        auto it = producers_.find(w.ev.link);
        if (it != producers_.end() && it->second.unsynced > 0) --it->second.unsynced;
        w.ev.after_sync = true;
        stage(w.out, std::move(w.ev));
    }
}

void queue_engine::set_blocked(producer& p, queue* full_queue) {
    if (full_queue != nullptr) {
        auto& waiting = full_queue->blocked_producers();
        if (std::find(waiting.begin(), waiting.end(), p.id) == waiting.end()) waiting.push_back(p.id);
    }
    const bool blocked = full_queue != nullptr;
    if (blocked == p.blocked) return;
    p.blocked = blocked;
    stage(p.out, ev_flow_control{p.id, blocked});
}

queue_engine::publish_step queue_engine::publish_one(producer& p, incoming_message& m, int64_t t) {
    queue* q = p.q;
    if (q == nullptr) {
        if (!p.out) return {publish_step::failed, nullptr, {errc::not_found, "the link's queue was deleted"}};
        if (m.to.empty())
            return {publish_step::failed, nullptr,
                    {errc::invalid_field, "message has no 'to' address: a sender with a null target "
                                          "(anonymous relay) must set properties.to"}};
        auto r = resolve(m.to, opts_.auto_create_queues);
        if (!r) return {publish_step::failed, nullptr, r.error()};
        q = r.value();
    }
    const uint64_t max_bytes = q->policy().max_depth_bytes;
    if (max_bytes != 0 && m.body.size() > max_bytes)
        return {publish_step::failed, nullptr,
                {errc::resource_limit_exceeded,
                 "message of " + std::to_string(m.body.size()) + " bytes can never fit queue '" +
                     q->name() + "' (max-depth-bytes " + std::to_string(max_bytes) + ")"}};
    if (q->full(m.body.size())) {
        if (q->policy().overflow == config::overflow_policy::block) return {publish_step::full, q, {}};
        ++q->counters_for_update().rejected_full;
        return {publish_step::failed, nullptr,
                {errc::resource_limit_exceeded,
                 "queue '" + q->name() + "' is full (" + std::to_string(q->depth()) + " messages, " +
                     std::to_string(q->depth_bytes()) + " bytes; max-depth-messages " +
                     std::to_string(q->policy().max_depth_messages) + ", max-depth-bytes " +
                     std::to_string(q->policy().max_depth_bytes) + ")"}};
    }
    queue_entry e;
    e.body = std::move(m.body);
    e.expiry_ms = m.expiry_ms;
    e.delivery_count = m.delivery_count;
    e.durable = m.durable;
    e.persistent = m.durable && q->policy().durable;
    if (e.persistent && !store_.writable())
        return {publish_step::failed, nullptr,
                {errc::resource_limit_exceeded,
                 "the node cannot store durable messages now: " + store_.failure()}};
    if (e.expiry_ms != 0 && e.expiry_ms <= t) {
        // Expired on arrival: accepted, then expired at once, by the queue's
        // policy. If that put it in a durable dead-letter queue, its answer
        // waits for the sync like any stored message.
        ++q->counters_for_update().expired;
        const bool durable = e.durable;
        expired(*q, std::move(e));
        return {publish_step::done, nullptr, {}, durable};
    }
    q->enqueue(std::move(e));
    const bool stored = q->last_entry().persistent;
    if (stored) store_.on_enqueue(q->name(), q->last_entry());
    touch(q);
    return {publish_step::done, nullptr, {}, stored};
}

} // namespace wharf::engine
