#include "wlm/core/cluster_admin.hpp"

namespace wharf::wlm {

namespace {
std::string owner_key(const std::string& q) { return std::string(owners_prefix) + q; }

std::string describe(const store_error& e) { return "metadata store: " + e.description; }
} // namespace

result<cluster_view, std::string> read_cluster(metadata_store& store) {
    cluster_view v;
    auto nodes = store.list(nodes_prefix);
    if (!nodes) return fail(describe(nodes.error()));
    for (const auto& kv : *nodes) {
        const std::string id = kv.key.substr(nodes_prefix.size());
        if (auto n = decode_node(id, kv.value)) {
            n->lease = kv.lease;
            v.nodes.emplace(id, std::move(*n));
        }
    }
    auto owners = store.list(owners_prefix);
    if (!owners) return fail(describe(owners.error()));
    for (const auto& kv : *owners) {
        if (auto o = decode_owner(kv.value)) {
            o->version = kv.version;
            v.owners.emplace(kv.key.substr(owners_prefix.size()), std::move(*o));
        }
    }
    auto drains = store.list(drain_prefix);
    if (!drains) return fail(describe(drains.error()));
    for (const auto& kv : *drains) v.drains.insert(kv.key.substr(drain_prefix.size()));
    return v;
}

result<placement_settings, std::string> read_placement(metadata_store& store, policy_kind configured_policy,
                                                       const placement_weights& configured_weights) {
    auto cur = store.get(placement_key);
    if (!cur) return fail(describe(cur.error()));
    placement_settings s;
    s.policy = configured_policy;
    s.weights = configured_weights;
    std::optional<placement_record> rec;
    if (*cur) rec = decode_placement((*cur)->value);
    if (rec && rec->policy) {
        s.policy = *rec->policy;
        s.policy_from_store = true;
    }
    if (rec && rec->weights) {
        s.weights = *rec->weights;
        s.weights_from_store = true;
    }
    return s;
}

result<owner_record, std::string> request_move(metadata_store& store, const std::string& queue,
                                               const std::string& target) {
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto cur = store.get(owner_key(queue));
        if (!cur) return fail(describe(cur.error()));
        if (!*cur) return fail("queue '" + queue + "' has no owner: nothing to move (it gets one on first use)");
        auto rec = decode_owner((*cur)->value);
        if (!rec) return fail("queue '" + queue + "': its owner record is unreadable: " + (*cur)->value);
        rec->version = (*cur)->version;
        if (rec->node == target && !rec->moving())
            return fail("queue '" + queue + "' is already on node " + target);
        if (rec->moving() && rec->to == target) return *rec; // already under way
        if (rec->moving() && rec->node == target) {
            // Back to where it is: cancel the move, as the owner abandons
            // one (epoch + 1, still the owner). The owner keeps what it
            // still holds; what reached the target comes back.
            owner_record next;
            next.node = rec->node;
            next.epoch = rec->epoch + 1;
            next.reason = "move to " + rec->to + " cancelled (operator request)";
            auto put = store.compare_and_set(owner_key(queue), rec->version, encode(next));
            if (put) {
                next.version = *put;
                return next;
            }
            if (put.error().code != store_errc::conflict) return fail(describe(put.error()));
            continue;
        }
        if (rec->moving())
            return fail("queue '" + queue + "' is already moving from " + rec->node + " to " + rec->to +
                        " (a move back to " + rec->node + " cancels it)");
        auto view = read_cluster(store);
        if (!view) return fail(view.error());
        auto t = view->nodes.find(target);
        if (t == view->nodes.end()) return fail("node '" + target + "' is not a live member of the cluster");
        if (t->second.load.st != node_load::state::active || view->drains.count(target))
            return fail("node '" + target + "' is draining: it takes no queues");
        if (!view->nodes.count(rec->node))
            return fail("queue '" + queue + "' is owned by node " + rec->node +
                        ", which is down: it cannot hand the queue over (reassign-after gives it a new owner)");
        owner_record next = *rec;
        next.st = owner_record::state::moving;
        next.to = target;
        next.reason = "moving to " + target + " (operator request); was: " + rec->reason;
        auto put = store.compare_and_set(owner_key(queue), rec->version, encode(next));
        if (put) {
            next.version = *put;
            return next;
        }
        if (put.error().code != store_errc::conflict) return fail(describe(put.error()));
    }
    return fail("queue '" + queue + "': its owner record keeps changing; try again");
}

result<bool, std::string> request_drain(metadata_store& store, const std::string& node, bool on) {
    const std::string key = std::string(drain_prefix) + node;
    auto cur = store.get(key);
    if (!cur) return fail(describe(cur.error()));
    if (!on) {
        if (!*cur) return false;
        auto del = store.compare_and_delete(key, (*cur)->version);
        if (!del) return fail(describe(del.error()));
        return true;
    }
    if (*cur) return false; // already asked
    auto member = store.get(std::string(nodes_prefix) + node);
    if (!member) return fail(describe(member.error()));
    if (!*member) return fail("node '" + node + "' is not a live member of the cluster");
    auto put = store.compare_and_set(key, 0, "requested");
    if (!put && put.error().code != store_errc::conflict) return fail(describe(put.error()));
    return true;
}

} // namespace wharf::wlm
