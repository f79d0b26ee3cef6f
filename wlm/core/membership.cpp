// wlm_service, part three: membership. The node holds a lease in the
// metadata store and renews it every lease_ttl / 3 (worker thread). It
// serves queues only while it is sure its lease is valid: a renewal that
// succeeded proves the lease lives until the time the renewal was *sent*
// plus the TTL (the store counts from when it received it, which is later).
// The fence thread watches that deadline: when renewals keep failing (the
// store is unreachable) and the deadline comes near, the node stops serving
// (its client links are detached, attaches refused) before the store can
// expire the lease and let another node take its queues. The worker rejoins
// (a new lease, the node record again, the caches reloaded) as soon as the
// store answers, and serves again.

#include "wlm/core/wlm_service.hpp"

#include <spdlog/spdlog.h>

namespace wharf::wlm {

namespace {
std::string node_key(std::string_view n) { return std::string(nodes_prefix) + std::string(n); }
} // namespace

std::chrono::milliseconds wlm_service::fence_margin() const {
    return std::max(std::chrono::milliseconds(50), opts_.lease_ttl / 10);
}

std::optional<std::string> wlm_service::register_node() {
    const auto sent = clock::now();
    auto lease = store_->grant_lease(opts_.lease_ttl);
    if (!lease) return lease.error().description;
    lease_ = *lease;
    {
        std::lock_guard l(mu_);
        lease_sure_until_ = sent + opts_.lease_ttl; // a new lease: its own deadline
        renew_id_ = lease_;
    }
    fence_cv_.notify_all();
    node_record me;
    me.host = node_.host;
    me.port = node_.port;
    me.load.node_id = node_.node_id;
    me.load.groups = opts_.groups;
    const std::string key = node_key(node_.node_id);
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto cur = store_->get(key);
        if (!cur) return cur.error().description;
        uint64_t expected = 0;
        if (*cur) {
            auto old = decode_node(node_.node_id, (*cur)->value);
            if (old && (old->host != me.host || old->port != me.port))
                return "node id '" + node_.node_id + "' is already in use by a live node at " +
                       old->host + ":" + std::to_string(old->port) + "; give this node another --node-id";
            expected = (*cur)->version; // our own previous run (or lease): take its place
        }
        auto put = store_->compare_and_set(key, expected, encode(me), lease_);
        if (put) {
            node_version_ = *put;
            return std::nullopt;
        }
        if (put.error().code != store_errc::conflict) return put.error().description;
    }
    return "cannot register node '" + node_.node_id + "': the key keeps changing";
}

void wlm_service::heartbeat() {
    if (!serving_) {
        rejoin();
        return;
    }
    const auto sent = clock::now();
    auto alive = store_->keep_alive(lease_);
    if (!alive) {
        if (alive.error().code == store_errc::lease_expired) {
            lose_lease("its membership lease expired (not renewed within " +
                       std::to_string(opts_.lease_ttl.count()) + " ms)");
        } else {
            spdlog::warn("{}: wlm: cannot renew the membership lease: {}", node_.node_id,
                         alive.error().description);
        }
        return;
    }
    {
        std::lock_guard l(mu_);
        lease_sure_until(sent + opts_.lease_ttl);
    }
    // Publish this node's load for the others' placement decisions.
    const auto figures = ctx_.load();
    node_record me;
    me.host = node_.host;
    me.port = node_.port;
    me.load.node_id = node_.node_id;
    me.load.groups = opts_.groups;
    me.load.messages = figures.messages;
    me.load.connections = figures.connections;
    me.load.queues = figures.queues;
    {
        std::lock_guard l(mu_);
        if (draining_locked()) me.load.st = node_load::state::draining;
    }
    auto put = store_->compare_and_set(node_key(node_.node_id), node_version_, encode(me), lease_);
    if (put) {
        node_version_ = *put;
        std::lock_guard l(mu_);
        nodes_[node_.node_id] = me; // our own state, before the change log says so
    } else if (put.error().code == store_errc::conflict) {
        if (auto cur = store_->get(node_key(node_.node_id)); cur && *cur) node_version_ = (*cur)->version;
    }
}

// Stops serving: every client link on a queue this node owns is detached
// with `why`, and attaches are refused until rejoin(). Any thread.
void wlm_service::fence(const std::string& why) {
    if (!serving_.exchange(false)) return;
    std::vector<std::string> mine;
    {
        std::lock_guard l(mu_);
        for (const auto& [q, o] : owners_)
            if (o.node == node_.node_id) mine.push_back(q);
    }
    const std::string text = "node " + node_.node_id + " lost its cluster membership: " + why +
                             "; its queues are unavailable until it rejoins";
    spdlog::error("{}: wlm: {}; detaching the links of {} queues", node_.node_id, text, mine.size());
    if (!mine.empty()) ctx_.detach_links(std::move(mine), error{errc::detach_forced, text});
}

// No two nodes serve one queue: without a lease this node serves nothing
// until it holds one again.
void wlm_service::lose_lease(const std::string& why) {
    fence(why);
    rejoin();
}

// A new lease and the node record again; then what this node owns now (its
// queues may have moved on meanwhile) before serving anything. Worker
// thread; while the store is unreachable it fails and the next heartbeat
// tries again.
void wlm_service::rejoin() {
    transfers_.clear(); // hand-overs start again from what the store says
    const lease_id old = lease_;
    if (auto bad = register_node()) {
        spdlog::warn("{}: wlm: cannot rejoin the cluster yet: {}", node_.node_id, *bad);
        return;
    }
    if (old != 0 && old != lease_) store_->revoke_lease(old); // if it still lives, it holds no key now
    if (!load_all()) return;
    serving_ = true;
    fence_cv_.notify_all();
    spdlog::info("{}: wlm: rejoined the cluster", node_.node_id);
}

void wlm_service::lease_sure_until(clock::time_point t) {
    if (t > lease_sure_until_) lease_sure_until_ = t;
}

// The renew thread: keeps the lease alive every lease_ttl / 3 on a store
// connection of its own. The worker renews it too (heartbeat), but a worker
// busy with a burst of work (10,000 first attaches placing 10,000 queues)
// would otherwise let it lapse, and the node would fence itself while the
// store was there all along. Failures are left to the worker (an expired
// lease: rejoin) and to the fence thread (no renewal at all: fence).
void wlm_service::renew_lease() {
    std::unique_lock l(mu_);
    while (!stop_) {
        renew_cv_.wait_for(l, opts_.lease_ttl / 3);
        const lease_id id = renew_id_;
        if (stop_ || id == 0 || !serving_) continue;
        l.unlock();
        const auto sent = clock::now();
        const bool alive = renew_store_->keep_alive(id).has_value();
        l.lock();
        if (alive && id == renew_id_) lease_sure_until(sent + opts_.lease_ttl);
    }
}

// The fence thread: fences the node when its lease is no longer surely
// valid. Only waits and reads the deadline, so a store call that hangs on
// the worker thread cannot delay it.
void wlm_service::watch_lease() {
    std::unique_lock l(mu_);
    while (!stop_) {
        const auto deadline = lease_sure_until_ - fence_margin();
        if (serving_ && clock::now() >= deadline) {
            const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(
                clock::now() - (lease_sure_until_ - opts_.lease_ttl));
            l.unlock();
            fence("the metadata store could not renew its lease for " + std::to_string(ago.count()) +
                  " ms (lease-ttl " + std::to_string(opts_.lease_ttl.count()) +
                  " ms), so it may have expired; the metadata store is unreachable");
            l.lock();
            continue;
        }
        if (serving_) fence_cv_.wait_until(l, deadline);
        else fence_cv_.wait_for(l, opts_.poll);
    }
}

} // namespace wharf::wlm
