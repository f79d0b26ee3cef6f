// wlm_service's caches of the metadata store: loaded whole at start (and
// after a gap in the change log), then kept by the changes the store
// reports; and the owner management's CREATE decides. See wlm_service.cpp
// for starting, resolving and serving attaches.

#include "wlm/core/wlm_service.hpp"

#include "wlm/core/cluster_admin.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <utility>

namespace wharf::wlm {

namespace {
std::string node_key(std::string_view n) { return std::string(nodes_prefix) + std::string(n); }
} // namespace

bool wlm_service::load_all() {
    auto rev = store_->revision();
    auto nodes = store_->list(nodes_prefix);
    auto owners = store_->list(owners_prefix);
    auto drains = store_->list(drain_prefix);
    auto routes = store_->list(routes_prefix);
    auto placement = store_->get(placement_key);
    auto settings = store_->list(settings_prefix);
    if (!rev || !nodes || !owners || !drains || !routes || !placement || !settings) return false;
    std::lock_guard l(mu_);
    ++world_version_;
    ++placement_inputs_version_;
    nodes_.clear();
    owners_.clear();
    owned_.clear();
    drains_.clear();
    routes_.clear();
    policy_override_.reset();
    settings_.clear();
    for (const auto& kv : *settings) settings_[kv.key.substr(settings_prefix.size())] = kv.value;
    weights_override_.reset();
    for (const auto& kv : *routes) {
        const std::string pattern = kv.key.substr(routes_prefix.size());
        if (auto r = decode_route(pattern, kv.value)) routes_[pattern] = std::move(*r);
    }
    if (*placement) apply_placement((*placement)->value);
    for (const auto& kv : *drains) drains_.insert(kv.key.substr(drain_prefix.size()));
    for (const auto& kv : *nodes) {
        const std::string id = kv.key.substr(nodes_prefix.size());
        if (auto n = decode_node(id, kv.value)) nodes_[id] = std::move(*n);
    }
    for (const auto& kv : *owners) {
        if (auto o = decode_owner(kv.value)) {
            o->version = kv.version;
            set_owner_locked(kv.key.substr(owners_prefix.size()), std::move(*o));
        }
    }
    revision_ = *rev;
    return true;
}

void wlm_service::apply(const change& c) {
    const std::string& key = c.kv.key;
    if (key.rfind(nodes_prefix, 0) == 0) {
        // A node's record is rewritten with its load every heartbeat; only
        // a node coming, going or moving concerns the hand-over tick.
        const std::string id = key.substr(nodes_prefix.size());
        if (c.kind == change::erase) {
            if (nodes_.erase(id) != 0) {
                ++world_version_;
                ++placement_inputs_version_;
            }
        } else if (auto n = decode_node(id, c.kv.value)) {
            auto& cur = nodes_[id];
            if (cur.host != n->host || cur.port != n->port) {
                ++world_version_;
                ++placement_inputs_version_;
            }
            cur = std::move(*n);
        }
        return;
    }
    ++world_version_;
    if (key.rfind(owners_prefix, 0) != 0 && key.rfind(settings_prefix, 0) != 0) ++placement_inputs_version_;
    if (key.rfind(owners_prefix, 0) == 0) {
        const std::string q = key.substr(owners_prefix.size());
        if (c.kind == change::erase) {
            erase_owner_locked(q);
        } else if (auto o = decode_owner(c.kv.value)) {
            o->version = c.kv.version;
            set_owner_locked(q, std::move(*o));
        }
    } else if (key.rfind(drain_prefix, 0) == 0) {
        const std::string id = key.substr(drain_prefix.size());
        if (c.kind == change::erase) drains_.erase(id);
        else drains_.insert(id);
    } else if (key.rfind(routes_prefix, 0) == 0) {
        const std::string pattern = key.substr(routes_prefix.size());
        if (c.kind == change::erase) routes_.erase(pattern);
        else if (auto r = decode_route(pattern, c.kv.value)) routes_[pattern] = std::move(*r);
    } else if (key.rfind(settings_prefix, 0) == 0) {
        const std::string q = key.substr(settings_prefix.size());
        if (c.kind == change::erase) settings_.erase(q);
        else settings_[q] = c.kv.value;
    } else if (key == placement_key) {
        if (c.kind == change::erase) apply_placement("");
        else apply_placement(c.kv.value);
    }
}

// The store's "placement" record (records.hpp): management's policy and
// weights; a part left out, or a record this node cannot read, leaves the
// configured one in force.
void wlm_service::apply_placement(std::string_view value) {
    auto rec = decode_placement(value).value_or(placement_record{});
    policy_override_ = rec.policy;
    weights_override_ = rec.weights;
}

void wlm_service::poll_changes() {
    auto changes = store_->changes_since("", revision_);
    if (!changes) {
        if (changes.error().code == store_errc::invalid) load_all(); // history pruned: start over
        return;
    }
    bool lost_me = false;
    {
        std::lock_guard l(mu_);
        for (const auto& c : *changes) {
            apply(c);
            revision_ = std::max(revision_, c.kv.version);
            if (c.kind == change::erase && c.kv.key == node_key(node_.node_id)) lost_me = true;
        }
    }
    if (lost_me && serving_) lose_lease("its membership record was removed (lease expired)");
}

result<std::pair<std::string, std::string>, error> wlm_service::decide_owner(const std::string& queue,
                                                                             const std::string& node) {
    std::lock_guard l(mu_);
    if (!node.empty()) {
        auto n = nodes_.find(node);
        if (n == nodes_.end())
            return fail(error{errc::not_allowed, "node '" + node + "' is not a live member of the cluster"});
        if (drains_.count(node) || n->second.load.st != node_load::state::active)
            return fail(error{errc::not_allowed, "node '" + node + "' is draining: it takes no queues"});
        return std::make_pair(node, std::string("created by management on node " + node));
    }
    auto d = place(queue, node_.node_id, candidates_locked(), rules_locked(), policy_locked(), weights_locked(),
                   placement_);
    if (!d) return fail(error{errc::not_allowed, "no node can take queue '" + queue + "': " + d.error()});
    return std::make_pair(d->node, "created by management; " + d->reason);
}

} // namespace wharf::wlm
