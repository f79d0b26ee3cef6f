#include "broker/engine/queue_engine.hpp"

#include "broker/amqp/annotations.hpp"
#include "broker/common/names.hpp"

#include <algorithm>
#include <chrono>

namespace wharf::engine {

namespace {
// Emptied batches kept for post_reusing: about one per connection that posts
// at the same time, and none larger than a big event batch's.
constexpr size_t kSpareBatches = 16;
constexpr size_t kSpareMaxCommands = 4096;

int64_t system_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

bool is_reserved(const std::string& address) {
    return address.rfind(queue_engine::dynamic_prefix, 0) == 0 || address.rfind("$", 0) == 0;
}
} // namespace

queue_engine::queue_engine(engine_options opts, message_store& store)
    : opts_(std::move(opts)), store_(store) {
    if (!opts_.clock) opts_.clock = system_clock_ms;
    for (const auto& d : opts_.queues) {
        auto q = std::make_unique<queue>(d.name, d.policy, false);
        queues_.emplace(d.name, std::move(q));
    }
    runner_thread_ = std::thread([this] { runner(); });
    store_.set_synced_callback([this](uint64_t epoch, bool ok, const std::string& reason) {
        post_detached(cmd_synced{epoch, ok, reason});
    });
}

queue_engine::~queue_engine() {
    store_.set_synced_callback(nullptr);
    {
        std::lock_guard lock(mu_);
        runner_stop_ = true;
    }
    runner_cv_.notify_all();
    runner_thread_.join();
}

void queue_engine::load(const std::string& name, std::vector<queue_entry>&& entries) {
    auto it = queues_.find(name);
    queue* q = it != queues_.end() ? it->second.get() : create_queue(name, false);
    for (auto& e : entries) q->load(std::move(e));
}

void queue_engine::forget_stored(queue& q, const queue_entry& e) {
    if (e.persistent) store_.on_remove(q.name(), e.seq);
}

// ---- the strand ----------------------------------------------------------

void queue_engine::post(command&& c) {
    std::vector<command> batch;
    batch.push_back(std::move(c));
    post(std::move(batch));
}

void queue_engine::post(std::vector<command>&& batch) { enqueue(std::move(batch), nullptr); }

void queue_engine::post_reusing(std::vector<command>& batch) { enqueue(std::move(batch), &batch); }

// Queues the batch and runs the strand here if no thread is running it.
// give_back (the moved-from batch itself, for post_reusing) gets an emptied
// batch's vector, if one is spare.
void queue_engine::enqueue(std::vector<command>&& batch, std::vector<command>* give_back) {
    {
        std::lock_guard lock(mu_);
        inbox_.push_back(std::move(batch));
        if (give_back != nullptr) {
            give_back->clear(); // moved from: make it a valid empty vector either way
            if (!spare_.empty()) {
                give_back->swap(spare_.back());
                spare_.pop_back();
            }
        }
        if (running_) return; // the running thread will pick it up
        running_ = true;
    }
    drain_inbox();
}

// For threads that must not be kept busy running the strand (the store's
// writer, plugins' workers): the engine's own runner thread takes it.
void queue_engine::post_detached(command&& c) {
    {
        std::lock_guard lock(mu_);
        std::vector<command> batch;
        batch.push_back(std::move(c));
        inbox_.push_back(std::move(batch));
        if (running_) return;
        running_ = true;
        runner_wanted_ = true;
    }
    runner_cv_.notify_one();
}

// Runs the strand until the inbox is empty; the caller set running_.
void queue_engine::drain_inbox() {
    std::vector<std::vector<command>> work;
    for (;;) {
        {
            std::lock_guard lock(mu_);
            if (inbox_.empty()) {
                running_ = false;
                return;
            }
            work.swap(inbox_);
        }
        for (auto& b : work) {
            for (auto& c : b) run(c);
            b.clear(); // keeps the capacity for post_reusing
        }
        finish_run();
        {
            std::lock_guard lock(mu_);
            for (auto& b : work) {
                if (spare_.size() >= kSpareBatches) break;
                if (b.capacity() != 0 && b.capacity() <= kSpareMaxCommands) spare_.push_back(std::move(b));
            }
        }
        work.clear();
    }
}

void queue_engine::runner() {
    std::unique_lock lock(mu_);
    for (;;) {
        runner_cv_.wait(lock, [this] { return runner_wanted_ || runner_stop_; });
        if (runner_stop_) return;
        runner_wanted_ = false;
        lock.unlock();
        drain_inbox();
        lock.lock();
    }
}

void queue_engine::run(command& c) {
    std::visit([this](auto& cmd) { handle(cmd); }, c);
}

void queue_engine::handle(cmd_run& c) {
    if (c.fn) (*c.fn)();
}

void queue_engine::finish_run() {
    const int64_t t = now();
    // Dispatching can dead-letter into queues not yet touched: loop by index.
    for (size_t i = 0; i < touched_.size(); ++i) {
        queue* q = touched_[i];
        // Room first (messages waiting under the block policy join the
        // queue), then hand out what the queue has. Dispatching can make room
        // itself (a pre-settled consumer takes messages for good, expired
        // ones leave): while it does and producers still wait, go round
        // again, or nothing would wake them.
        for (;;) {
            if (!q->blocked_producers().empty() && !q->full(0)) {
                std::vector<link_id> waiting;
                waiting.swap(q->blocked_producers());
                for (link_id id : waiting) {
                    auto it = producers_.find(id);
                    if (it != producers_.end()) drain_backlog(it->second);
                }
            }
            const uint64_t before = q->depth();
            q->dispatch(t, *this);
            if (q->blocked_producers().empty() || q->full(0) || q->depth() >= before) break;
        }
    }
    for (queue* q : touched_) q->clear_touched();
    touched_.clear();
    for (queue* q : doomed_) delete_queue(q);
    doomed_.clear();
    uint64_t epoch = store_.commit();
    if (epoch != 0) last_epoch_ = epoch;
    // Nothing new to sync, but earlier answers still wait: queue behind them
    // (answers to one producer must keep their order).
    if (epoch == 0 && !waiting_.empty()) epoch = last_epoch_;
    for (auto& w : this_run_) {
        if (epoch == 0) {
            auto it = producers_.find(w.ev.link);
            if (it != producers_.end() && it->second.unsynced > 0) --it->second.unsynced;
            stage(w.out, std::move(w.ev));
        } else {
            w.epoch = epoch;
            waiting_.push_back(std::move(w));
        }
    }
    this_run_.clear();
    for (auto& o : dirty_) {
        o->dirty_ = false;
        o->deliver(std::move(o->staged_));
        o->staged_.clear();
    }
    dirty_.clear();
}

void queue_engine::touch(queue* q) {
    if (q->mark_touched()) touched_.push_back(q);
}

// The outbox is kept alive until the run hands its events over: the link
// (and the connection) may be gone by then.
void queue_engine::stage(const std::shared_ptr<outbox>& o, event&& ev) {
    if (!o) return;
    if (!o->dirty_) {
        o->dirty_ = true;
        dirty_.push_back(o);
    }
    o->staged_.push_back(std::move(ev));
}

// ---- queues --------------------------------------------------------------

queue* queue_engine::create_queue(const std::string& name, bool dynamic) {
    config::queue_policy policy = opts_.queue_defaults;
    if (dynamic) policy.durable = false; // a temporary queue does not outlive its link
    auto q = std::make_unique<queue>(name, std::move(policy), dynamic);
    queue* raw = q.get();
    queues_.emplace(name, std::move(q));
    if (!dynamic) queue_set_version_.fetch_add(1, std::memory_order_release); // (a temporary queue's link is its owner)
    return raw;
}

result<queue*, error> queue_engine::resolve(const std::string& address, bool create) {
    auto it = queues_.find(address);
    if (it != queues_.end()) return it->second.get();
    if (address.empty())
        return fail(error{errc::invalid_field, "the address is empty"});
    if (address.size() > max_queue_name)
        return fail(error{errc::invalid_field, "the address is " + std::to_string(address.size()) +
                                                   " bytes long; a queue's name is at most " +
                                                   std::to_string(max_queue_name) + " bytes"});
    if (auto bad = check_queue_name(address)) return fail(error{errc::invalid_field, "the address: " + *bad});
    if (address.rfind(dynamic_prefix, 0) == 0)
        return fail(error{errc::not_found, "temporary queue '" + address + "' no longer exists"});
    if (address == "$management")
        return fail(error{errc::not_found, "'$management' takes requests on a link attached to it, not as messages "
                                           "addressed to it through the anonymous relay"});
    if (is_reserved(address))
        return fail(error{errc::not_found, "no node named '" + address + "' on this broker"});
    if (!create)
        return fail(error{errc::not_found,
                          "queue '" + address + "' does not exist and auto-create-queues is off"});
    return create_queue(address, false);
}

void queue_engine::delete_queue(queue* q) {
    dynamic_owner_.erase(q);
    for (auto& e : q->take_all()) forget_stored(*q, e);
    error gone{errc::not_found, "queue '" + q->name() + "' was deleted"};
    for (auto it = consumers_.begin(); it != consumers_.end();) {
        if (it->second->q != q) {
            ++it;
            continue;
        }
        stage(it->second->out_owner, ev_detach{it->first, gone});
        it = consumers_.erase(it);
    }
    for (auto& [id, p] : producers_) {
        if (p.q != q) continue;
        stage(p.out, ev_detach{id, gone});
        p.q = nullptr;
        p.out.reset(); // keep the entry: later publishes fail cleanly
    }
    const std::string name = q->name();
    const bool dynamic = q->dynamic();
    std::vector<link_id> waiting;
    waiting.swap(q->blocked_producers());
    queues_.erase(name);
    if (!dynamic) queue_set_version_.fetch_add(1, std::memory_order_release);
    // Producers that waited for room in it: their next message now fails
    // (no such queue) instead of waiting forever.
    for (link_id id : waiting) {
        auto it = producers_.find(id);
        if (it != producers_.end()) drain_backlog(it->second);
    }
}

void queue_engine::dead_letter(queue& from, queue_entry&& e) {
    const std::string& target = from.policy().dead_letter_queue;
    if (target.empty() || target == from.name()) { // dropped by policy
        forget_stored(from, e);
        return;
    }
    auto it = queues_.find(target);
    queue* dlq = it != queues_.end() ? it->second.get() : create_queue(target, false);
    // The DLQ's enqueue record goes first, so that a crash between the two
    // records leaves the message twice rather than nowhere.
    const bool was_stored = e.persistent;
    const uint64_t old_seq = e.seq;
    e.excluded.reset();
    e.expiry_ms = 0; // it has expired already, or must not expire from the DLQ unseen
    // Nor anywhere else: a dead-letter queue another node owns reads the
    // copy's TTL again when the copy reaches it, and the copy expired there
    // (lost: that queue's dead-letter queue is itself). The copy's header
    // keeps everything but its TTL.
    if (auto info = amqp::scan_message(e.body.bytes()); info && info->header.ttl_ms) {
        amqp::header_fields h = info->header;
        h.ttl_ms.reset();
        e.body = message_ref::copy_of(amqp::with_header(e.body.bytes(), *info, h));
    }
    ++from.counters_for_update().dead_lettered;
    // Stored even while the disk fails: the writer keeps what it could not
    // write and writes it when it can, with the source's remove below.
    e.persistent = e.durable && dlq->policy().durable;
    dlq->enqueue(std::move(e));
    if (dlq->last_entry().persistent) store_.on_enqueue(dlq->name(), dlq->last_entry());
    if (was_stored) store_.on_remove(from.name(), old_seq);
    touch(dlq);
}

// A message that left a consumer goes back to its queue, unless it has now
// been delivered too often.
void queue_engine::return_entry(queue& q, queue_entry&& e, bool rewritten) {
    const uint32_t max = q.policy().max_delivery_count;
    if (max != 0 && e.delivery_count >= max) {
        q.forget(e);
        dead_letter(q, std::move(e));
        return;
    }
    // A new enqueue record with the same seq replaces the stored message.
    if (e.persistent) rewritten ? store_.on_enqueue(q.name(), e) : store_.on_update(q.name(), e);
    q.restore(std::move(e));
    touch(&q);
}

// Combines the annotations a modified outcome carried for `e`, if any, with
// its message-annotations; false when there were none to combine (an empty
// map changes nothing). A message whose bytes do not scan (a relay's
// producer can send any bytes) or that would outgrow the node's largest
// message keeps its bytes.
bool queue_engine::annotate(queue& q, queue_entry& e, const std::vector<annotation_change>& changes) {
    auto change = std::find_if(changes.begin(), changes.end(), [&](const annotation_change& a) { return a.seq == e.seq; });
    if (change == changes.end() || amqp::annotation_count(change->map) == 0) return false;
    auto info = amqp::scan_message(e.body.bytes());
    if (!info) return false;
    std::string bytes = amqp::with_annotations(e.body.bytes(), *info, change->map);
    const uint64_t largest = opts_.max_message_size != 0 ? opts_.max_message_size : message_ref::max_size;
    if (bytes.size() > std::min<uint64_t>(largest, message_ref::max_size)) return false;
    q.replace_body(e, message_ref::copy_of(bytes));
    return true;
}

// ---- commands ------------------------------------------------------------

void queue_engine::handle(cmd_attach_consumer& c) {
    queue* q = nullptr;
    if (c.dynamic) {
        std::string name = std::string(dynamic_prefix) + opts_.node_id + "." +
                           std::to_string(++dynamic_counter_);
        q = create_queue(name, true);
        dynamic_owner_[q] = c.link;
    } else {
        auto r = resolve(c.address, opts_.auto_create_queues);
        if (!r) {
            stage(c.out, ev_attached{c.link, r.error(), c.address});
            return;
        }
        q = r.value();
    }
    auto con = std::make_unique<consumer>();
    con->id = c.link;
    con->q = q;
    con->out = c.out.get();
    con->out_owner = std::move(c.out);
    con->browse = c.browse;
    con->settle_on_send = c.settle_on_send || c.browse;
    con->selector = std::move(c.selector);
    q->add_consumer(con.get());
    stage(con->out_owner, ev_attached{c.link, std::nullopt, q->name()});
    consumers_.emplace(c.link, std::move(con));
    touch(q);
}

void queue_engine::handle(cmd_attach_producer& c) {
    producer p{c.link, nullptr, std::move(c.out), false};
    if (!c.address.empty()) {
        auto r = resolve(c.address, opts_.auto_create_queues);
        if (!r) {
            stage(p.out, ev_attached{c.link, r.error(), c.address});
            return;
        }
        p.q = r.value();
        if (p.q->policy().overflow == config::overflow_policy::block && p.q->full(0))
            set_blocked(p, p.q);
    }
    stage(p.out, ev_attached{c.link, std::nullopt, p.q ? p.q->name() : std::string()});
    producers_.emplace(c.link, std::move(p));
}

void queue_engine::handle(cmd_credit& c) {
    auto it = consumers_.find(c.link);
    if (it == consumers_.end() || it->second->leaving) return;
    it->second->limit = c.limit;
    it->second->drain = c.drain;
    touch(it->second->q);
}

void queue_engine::handle(cmd_settle& c) {
    auto it = consumers_.find(c.link);
    if (it == consumers_.end()) return; // released when the link detached
    consumer& con = *it->second;
    queue& q = *con.q;
    for (const settlement& s : c.settlements) {
        if (s.outcome == outcome_kind::too_large && con.browse) {
            // A browser's copy it never got: its credit comes back (the
            // browser has passed it, and does not see it).
            if (con.assigned > 0) --con.assigned;
            touch(&q);
            continue;
        }
        queue_entry e;
        if (!con.acquired.take(s.seq, e)) continue;
        switch (s.outcome) {
        case outcome_kind::accepted:
            acknowledge(q, e);
            break;
        case outcome_kind::rejected:
            q.forget(e);
            e.redelivered = true; // acquired once: first-acquirer is false from now on
            dead_letter(q, std::move(e));
            touch(&q);
            break;
        case outcome_kind::released: // (or modified with neither flag)
            e.redelivered = true;
            if (!c.annotations.empty() && annotate(q, e, c.annotations) && e.persistent)
                store_.on_enqueue(q.name(), e);
            q.restore(std::move(e));
            touch(&q);
            break;
        case outcome_kind::modified_failed:
        case outcome_kind::modified_undeliverable:
        case outcome_kind::modified_failed_undeliverable: {
            e.redelivered = true;
            if (s.outcome != outcome_kind::modified_undeliverable) e.count_delivery();
            if (s.outcome != outcome_kind::modified_failed) {
                if (!e.excluded) e.excluded = std::make_unique<std::vector<link_id>>();
                e.excluded->push_back(con.id);
            }
            const bool rewritten = !c.annotations.empty() && annotate(q, e, c.annotations);
            return_entry(q, std::move(e), rewritten);
            break;
        }
        case outcome_kind::unsent:
            if (con.assigned > 0) --con.assigned;
            q.restore(std::move(e));
            touch(&q);
            break;
        case outcome_kind::too_large:
            if (con.assigned > 0) --con.assigned;
            if (!e.excluded) e.excluded = std::make_unique<std::vector<link_id>>();
            e.excluded->push_back(con.id);
            q.restore(std::move(e));
            touch(&q);
            break;
        }
    }
    if (c.limit) con.limit = *c.limit;
}

void queue_engine::handle(cmd_detach& c) {
    if (auto it = consumers_.find(c.link); it != consumers_.end()) {
        consumer& con = *it->second;
        queue& q = *con.q;
        // A message the client may have seen comes back with delivery-count + 1.
        auto seen = [&](queue_entry&& e) {
            e.count_delivery();
            e.redelivered = true;
            return_entry(q, std::move(e));
        };
        for (uint64_t seq : c.sent_unsettled) {
            queue_entry e;
            if (!con.acquired.take(seq, e)) continue;
            seen(std::move(e));
        }
        for (auto& e : con.acquired.take_all()) {
            if (con.settle_on_send && c.presettled_sent) acknowledge(q, e);
            else if (c.all_sent && !con.settle_on_send) seen(std::move(e));
            else q.restore(std::move(e)); // never reached the client
        }
        q.remove_consumer(&con);
        touch(&q);
        auto owner = dynamic_owner_.find(&q);
        if (owner != dynamic_owner_.end() && owner->second == c.link) doomed_.push_back(&q);
        consumers_.erase(it);
        return;
    }
    producers_.erase(c.link);
}

// A message acquired from `q` is gone for good: accepted, or sent pre-settled.
void queue_engine::acknowledge(queue& q, const queue_entry& e) {
    q.forget(e);
    ++q.counters_for_update().acknowledged;
    forget_stored(q, e);
    touch(&q); // room for blocked producers
}

void queue_engine::handle(cmd_detach_queues& c) {
    for (const auto& name : c.queues) {
        auto qi = queues_.find(name);
        if (qi == queues_.end()) continue;
        queue* q = qi->second.get();
        for (auto it = consumers_.begin(); it != consumers_.end();) {
            consumer& con = *it->second;
            if (con.q != q || is_internal(con.id) || con.leaving) {
                ++it;
                continue;
            }
            q->remove_consumer(&con);
            if (!con.acquired.empty()) {
                // Only the connection knows which of these reached the
                // client (at-most-once: which it wrote; the others must
                // come back, not be counted as sent). It answers after
                // every delivery staged before this detach, then detaches
                // (cmd_detach); the queue keeps them until then.
                con.leaving = true;
                stage(con.out_owner, ev_detach{con.id, c.err, c.redirect, true});
                ++it;
                continue;
            }
            stage(con.out_owner, ev_detach{con.id, c.err, c.redirect});
            it = consumers_.erase(it);
        }
        for (auto it = producers_.begin(); it != producers_.end();) {
            if (it->second.q != q) {
                ++it;
                continue;
            }
            stage(it->second.out, ev_detach{it->first, c.err, c.redirect});
            it = producers_.erase(it);
        }
        touch(q);
    }
}

void queue_engine::handle(cmd_delete_queue_if_idle& c) {
    auto qi = queues_.find(c.queue);
    bool gone = qi == queues_.end();
    if (!gone && qi->second->depth() == 0 && qi->second->consumer_count() == 0) {
        queue* q = qi->second.get();
        bool producers = false;
        for (const auto& [id, p] : producers_) producers = producers || p.q == q;
        if (!producers && q->blocked_producers().empty()) {
            // It may be listed for this run's dispatch: unlist it first.
            touched_.erase(std::remove(touched_.begin(), touched_.end(), q), touched_.end());
            doomed_.erase(std::remove(doomed_.begin(), doomed_.end(), q), doomed_.end());
            delete_queue(q);
            gone = true;
        }
    }
    if (c.done) (*c.done)(gone);
}

void queue_engine::handle(cmd_tick&) {
    const int64_t t = now();
    // Expiry may create a dead-letter queue: do not iterate queues_ meanwhile.
    std::vector<queue*> all;
    all.reserve(queues_.size());
    for (auto& [name, q] : queues_) all.push_back(q.get());
    for (queue* q : all)
        if (q->expire(t, *this) > 0) touch(q);
}

// ---- dispatch_sink -------------------------------------------------------

void queue_engine::deliver(consumer& c, const queue_entry& e, bool settle_on_send) {
    stage(c.out_owner, ev_deliver{c.id, e.seq, e.body, e.delivery_count, e.redelivered, settle_on_send, c.browse});
}

void queue_engine::drained(consumer& c) { stage(c.out_owner, ev_drained{c.id}); }

void queue_engine::expired(queue& q, queue_entry&& e) {
    if (q.policy().expiry == config::expiry_policy::dead_letter) {
        dead_letter(q, std::move(e));
    } else {
        forget_stored(q, e);
    }
}

} // namespace wharf::engine
