// wlm_service, part two: hand-overs. Everything here runs on the WLM worker
// thread, once per tick, and works from what the store says (the caches)
// and what the queue engine holds (ctx_.queues()): so a step that failed or
// was cut short by a crash is simply taken again on a later tick.

#include "wlm/core/wlm_service.hpp"

#include <spdlog/spdlog.h>

namespace wharf::wlm {

namespace {
constexpr size_t max_moves_out_of_draining_node = 16;

std::string owner_key(std::string_view q) { return std::string(owners_prefix) + std::string(q); }
bool internal_name(const std::string& q) { return q.empty() || q[0] == '$'; }
} // namespace

bool wlm_service::cas_owner(const std::string& queue, const owner_record& rec, const owner_record& next) {
    auto put = store_->compare_and_set(owner_key(queue), rec.version, encode(next));
    if (!put) {
        // Lost a race (or the store failed): the change log brings the
        // record as it is, and the next tick decides again.
        again_ = true;
        spdlog::info("{}: wlm: queue '{}': owner record changed meanwhile ({}); will look again",
                     node_.node_id, queue, put.error().description);
        return false;
    }
    owner_record cached = next;
    cached.version = *put;
    std::lock_guard l(mu_);
    set_owner_locked(queue, std::move(cached));
    return true;
}

std::shared_ptr<internode::forwarder> wlm_service::forwarder_to(const std::string& node) {
    auto& f = forwarders_[node];
    if (f && !f->broken()) return f;
    node_record target;
    {
        std::lock_guard l(mu_);
        auto n = nodes_.find(node);
        if (n == nodes_.end()) return nullptr;
        target = n->second;
    }
    internode::forwarder_options o;
    o.host = target.host;
    o.port = target.port;
    o.container_id = "wharf-" + node_.node_id + "-to-" + node;
    o.link_properties[std::string(plugins::forwarded_from_property)] = node_.node_id;
    f = std::make_shared<internode::forwarder>(std::move(o));
    return f;
}

// A walk asks the queue engine for every queue it holds and looks each up in
// the caches: at 10,000 queues that costs tens of milliseconds of both
// threads, so a tick walks only when something it acts on may have changed.
// What ends a hand-over, a drain or a reassignment (messages arriving at the
// target, a deadline) is not such a change: while one is under way every
// tick walks. The safety net catches whatever a trigger missed.
bool wlm_service::reconcile_due(clock::time_point now) {
    constexpr int safety_net_ticks = 300; // a minute at the default poll-interval
    const uint64_t queues = ctx_.queue_set_version();
    uint64_t world;
    {
        std::lock_guard l(mu_);
        world = world_version_;
    }
    const std::pair seen{queues, world};
    const bool due = !reconciled_ || *reconciled_ != seen || again_ || !transfers_.empty() || drain_pending_ ||
                     (opts_.reassign_after && !down_since_.empty()) || now >= next_full_reconcile_;
    if (!due) return false;
    // Read before the walk: a change during it brings another.
    reconciled_ = seen;
    again_ = false;
    next_full_reconcile_ = now + opts_.poll * safety_net_ticks;
    return true;
}

void wlm_service::reconcile() {
    if (!serving_) {
        again_ = true; // not serving: nothing was looked at
        return;
    }
    const auto held = ctx_.queues();
    std::set<std::string> here;
    for (const auto& q : held) {
        if (q.dynamic || internal_name(q.name)) continue;
        here.insert(q.name);
        std::optional<owner_record> rec;
        {
            std::lock_guard l(mu_);
            if (auto o = owners_.find(q.name); o != owners_.end()) rec = o->second;
        }
        if (!rec) {
            // Messages this node stored for a queue the cluster does not
            // know (a fresh metadata store): they make it this node's.
            if (q.depth > 0) claim(q.name, q.depth);
            // Links on it but nothing yet (a producer attached in the race
            // with a delete): messages arriving change no version, so look
            // again next tick.
            else if (q.links > 0) again_ = true;
            continue;
        }
        const bool ours = rec->node == node_.node_id && !rec->moving();
        const bool incoming = rec->moving() && rec->to == node_.node_id; // a move to here under way
        if (ours || incoming) {
            transfers_.erase(q.name); // (ours: a move abandoned, keep what is left here)
            apply_settings(q.name);
            continue;
        }
        hand_over(q, *rec);
    }
    for (auto it = transfers_.begin(); it != transfers_.end();)
        it = here.count(it->first) ? std::next(it) : transfers_.erase(it);
    for (auto it = applied_settings_.begin(); it != applied_settings_.end();)
        it = here.count(it->first) ? std::next(it) : applied_settings_.erase(it);

    // Moves of queues this node owns but holds nothing of: nothing to send.
    std::vector<std::pair<std::string, owner_record>> empty_moves;
    {
        std::lock_guard l(mu_);
        for (const auto& [q, o] : owners_)
            if (o.node == node_.node_id && o.moving() && !here.count(q)) empty_moves.emplace_back(q, o);
    }
    for (const auto& [q, o] : empty_moves) {
        bool target_live;
        {
            std::lock_guard l(mu_);
            target_live = nodes_.count(o.to) != 0;
        }
        if (target_live) flip(q, o);
        else abandon_move(q, o, "node " + o.to + " is down");
    }
    drain_some();
    reassign_down();
}

// Management's settings for a queue of this node: applied when the queue
// first shows up here (created, moved in, recovered) and when they change.
void wlm_service::apply_settings(const std::string& queue) {
    std::string want;
    {
        std::lock_guard l(mu_);
        if (auto it = settings_.find(queue); it != settings_.end()) want = it->second;
    }
    auto [had, fresh] = applied_settings_.try_emplace(queue);
    if (!fresh && had->second == want) return;
    if (!want.empty() && !ctx_.configure_queue(queue, decode_settings(want))) {
        again_ = true;
        return;
    }
    had->second = want;
}

// `q` is held here but belongs, or is about to belong, to another node.
void wlm_service::hand_over(const plugins::local_queue& q, const owner_record& rec) {
    const bool moving_out = rec.node == node_.node_id; // else: a leftover of a queue owned elsewhere
    const std::string target = rec.moving() ? rec.to : rec.node;
    std::optional<node_record> to;
    {
        std::lock_guard l(mu_);
        if (auto n = nodes_.find(target); n != nodes_.end()) to = n->second;
    }
    if (!to) {
        transfers_.erase(q.name);
        if (moving_out) abandon_move(q.name, rec, "node " + target + " is down");
        return; // a leftover waits for its owner to return (or be replaced)
    }
    if (q.links > 0) {
        // Clients still attached here (or attached in the race with the
        // move's start): send them to the owner-to-be.
        ctx_.detach_links({q.name},
                          error{errc::redirect, "queue '" + q.name + "' " +
                                                    (moving_out ? "is moving to" : "is owned by") + " node " +
                                                    target + " at " + to->host + ":" + std::to_string(to->port) +
                                                    "; attach there"},
                          plugins::redirect_target{target, to->host, to->port});
    }
    auto& t = transfers_[q.name];
    if (t && (t->broken() || t->target() != target)) t.reset();
    if (!t) {
        auto fwd = forwarder_to(target);
        if (!fwd) return;
        t = std::make_unique<transfer>(ctx_, q.name, target, std::move(fwd));
        spdlog::info("{}: wlm: handing queue '{}' ({} messages) to node {}", node_.node_id, q.name, q.depth,
                     target);
    }
    if (moving_out) {
        // The target refuses what retrying will not change: give the move
        // up rather than retry for ever. What it refused stays here in
        // order; what it took comes back as a leftover of a queue owned
        // here (behind what stayed).
        if (auto why = t->refused_for_good(); !why.empty()) {
            transfers_.erase(q.name); // ends the tap: what it holds goes back to the queue
            abandon_move(q.name, rec, why + "; the queue stays on " + node_.node_id);
            return;
        }
    }
    t->top_up();
    if (q.depth != 0 || q.links != 0 || t->in_flight() != 0) return;
    // Everything arrived at the target.
    if (moving_out && !flip(q.name, rec)) return;
    const uint64_t moved = t->moved();
    transfers_.erase(q.name); // ends the tap, before the queue goes
    if (!ctx_.delete_queue_if_idle(q.name)) { // something came in meanwhile: next tick
        again_ = true;
        return;
    }
    spdlog::info("{}: wlm: queue '{}' handed to node {} ({} messages moved)", node_.node_id, q.name, target,
                 moved);
}

// The move is complete: the target owns the queue from the next epoch.
bool wlm_service::flip(const std::string& queue, const owner_record& rec) {
    owner_record next;
    next.node = rec.to;
    next.epoch = rec.epoch + 1;
    next.reason = "moved from " + rec.node;
    if (!cas_owner(queue, rec, next)) return false;
    spdlog::info("{}: wlm: queue '{}' now owned by node {} (epoch {})", node_.node_id, queue, next.node,
                 next.epoch);
    return true;
}

void wlm_service::abandon_move(const std::string& queue, const owner_record& rec, const std::string& why) {
    owner_record next;
    next.node = rec.node;
    next.epoch = rec.epoch + 1;
    next.reason = "move to " + rec.to + " abandoned: " + why;
    if (cas_owner(queue, rec, next))
        spdlog::warn("{}: wlm: queue '{}': {}", node_.node_id, queue, next.reason);
}

void wlm_service::claim(const std::string& queue, uint64_t depth) {
    owner_record rec;
    rec.node = node_.node_id;
    rec.epoch = 1;
    rec.reason = "holds " + std::to_string(depth) + " messages stored here before the cluster knew the queue";
    auto put = store_->compare_and_set(owner_key(queue), 0, encode(rec));
    if (!put) { // someone else placed it (the change log tells, the next tick hands over), or the store failed
        again_ = true;
        return;
    }
    rec.version = *put;
    spdlog::info("{}: wlm: queue '{}' -> {} ({})", node_.node_id, queue, rec.node, rec.reason);
    std::lock_guard l(mu_);
    set_owner_locked(queue, std::move(rec));
}

// A draining node moves its queues away, a few at a time, to where
// placement (which no longer offers this node) puts them.
void wlm_service::drain_some() {
    std::vector<std::pair<std::string, owner_record>> todo;
    size_t under_way = 0;
    uint64_t inputs;
    {
        std::lock_guard l(mu_);
        if (!draining_locked()) {
            drain_stuck_.clear();
            drain_pending_ = false;
            return;
        }
        inputs = placement_inputs_version_;
        for (const auto& [q, o] : owners_) {
            if (o.node != node_.node_id) continue;
            if (o.moving()) ++under_way;
            else todo.emplace_back(q, o);
        }
    }
    if (inputs != drain_stuck_inputs_) { // a node, drain, route or policy changed: decide (and say) again
        drain_stuck_.clear();
        drain_stuck_inputs_ = inputs;
    }
    bool pending = under_way > 0;
    for (auto& [q, rec] : todo) {
        // A queue found unmovable stays so until placement's inputs change.
        if (drain_stuck_.count(q)) continue;
        if (under_way >= max_moves_out_of_draining_node) {
            pending = true;
            break;
        }
        owner_record next = rec;
        {
            std::lock_guard l(mu_);
            auto d = place(q, node_.node_id, candidates_locked(), rules_locked(), policy_locked(), weights_locked(),
                           placement_);
            if (!d || d->node == node_.node_id) {
                spdlog::warn("{}: wlm: draining: queue '{}' has nowhere to go: {}", node_.node_id, q,
                             d ? "placement keeps it here" : d.error());
                drain_stuck_.insert(q);
                continue;
            }
            next.st = owner_record::state::moving;
            next.to = d->node;
            next.reason = "moving to " + d->node + " (node " + node_.node_id + " draining; " + d->reason + ")";
        }
        pending = true; // moving now, or the record changed meanwhile (cas_owner: look again)
        if (cas_owner(q, rec, next)) {
            ++under_way;
            spdlog::info("{}: wlm: draining: queue '{}' moves to node {}", node_.node_id, q, next.to);
        }
    }
    drain_pending_ = pending;
}

// With reassign-after: the queues of a node down that long get new owners.
// Every node races to do it; compare-and-set lets one win per queue.
void wlm_service::reassign_down() {
    const auto now = clock::now();
    std::vector<std::pair<std::string, owner_record>> orphans;
    {
        std::lock_guard l(mu_);
        std::set<std::string> holding; // down nodes that still own queues
        for (const auto& [q, o] : owners_) {
            if (nodes_.count(o.node)) continue;
            holding.insert(o.node);
            auto since = down_since_.try_emplace(o.node, now).first->second;
            if (opts_.reassign_after && now - since >= *opts_.reassign_after) orphans.emplace_back(q, o);
        }
        // A node that came back, or whose queues all went elsewhere, is
        // no longer waited on (and no longer makes every tick walk).
        for (auto it = down_since_.begin(); it != down_since_.end();)
            it = holding.count(it->first) ? std::next(it) : down_since_.erase(it);
    }
    for (auto& [q, rec] : orphans) {
        owner_record next;
        {
            std::lock_guard l(mu_);
            auto d = place(q, node_.node_id, candidates_locked(), rules_locked(), policy_locked(), weights_locked(),
                           placement_);
            if (!d) {
                spdlog::warn("{}: wlm: queue '{}' of down node {} cannot be reassigned: {}", node_.node_id, q,
                             rec.node, d.error());
                continue;
            }
            next.node = d->node;
            next.epoch = rec.epoch + 1;
            next.reason = "reassigned: node " + rec.node + " down for over " + seconds_text(*opts_.reassign_after) +
                          " s; " + d->reason;
        }
        if (cas_owner(q, rec, next))
            spdlog::warn("{}: wlm: queue '{}' reassigned from down node {} to node {}", node_.node_id, q,
                         rec.node, next.node);
    }
}

} // namespace wharf::wlm
