#pragma once
// cluster_admin: what an operator asks of the cluster, as writes to the
// metadata store that the nodes then carry out — move a queue to another
// node, drain a node or end its drain — and a view of the cluster's state.
// Used by the wharf-wlm command and (later) by AMQP management. Each request
// checks what it can see first and says why it cannot be done.
//
// Threads: none of its own; blocking calls on the store it is given.

#include "broker/common/result.hpp"
#include "wlm/core/records.hpp"
#include "wlm/metadata/metadata_store.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace wharf::wlm {

struct cluster_view {
    std::map<std::string, node_record> nodes;    // live members (a down node has no record)
    std::map<std::string, owner_record> owners;  // queue -> owner
    std::set<std::string> drains;                // nodes an operator asked to drain
};

result<cluster_view, std::string> read_cluster(metadata_store& store);

// The placement policy and weights in force: the store's "placement" record
// (management's) over the configured ones, each part on its own. A record
// that cannot be read counts as none, as the nodes treat it.
struct placement_settings {
    policy_kind policy = policy_kind::least_loaded;
    placement_weights weights;
    bool policy_from_store = false;
    bool weights_from_store = false;
};
result<placement_settings, std::string> read_placement(metadata_store& store, policy_kind configured_policy,
                                                       const placement_weights& configured_weights);

// How many queues each node owns, from the owner records: a moving queue
// counts at its next owner. `owners`: queue -> owner_record, any map type.
inline const std::string& holder(const owner_record& o) { return o.moving() ? o.to : o.node; }
template <class Owners>
std::map<std::string, uint64_t> tally_owners(const Owners& owners) {
    std::map<std::string, uint64_t> owned;
    for (const auto& [q, o] : owners) ++owned[holder(o)];
    return owned;
}

// The figures placement decides with, one per live node (in id order): the
// node's record, with `queues` from the tally (tally_owners, or one kept up
// to date as owners change), so that a burst of decisions spreads before the
// next heartbeat, and state draining as soon as a drain is asked.
template <class Tally>
std::vector<node_load> loads_from_tally(const std::map<std::string, node_record>& nodes, const Tally& owned,
                                        const std::set<std::string>& drains) {
    std::vector<node_load> out;
    for (const auto& [id, n] : nodes) {
        node_load l = n.load;
        const auto t = owned.find(id);
        l.queues = t == owned.end() ? 0 : t->second;
        if (drains.count(id)) l.st = node_load::state::draining;
        out.push_back(std::move(l));
    }
    return out;
}
template <class Owners>
std::vector<node_load> placement_loads(const std::map<std::string, node_record>& nodes, const Owners& owners,
                                       const std::set<std::string>& drains) {
    return loads_from_tally(nodes, tally_owners(owners), drains);
}

// Asks the owner of `queue` to hand it to `target`. Refused when the queue
// has no owner, the owner or the target is not a live member, the target is
// draining, or the queue is already there or already moving elsewhere.
// Asking again for a move in progress to the same target is fine; asking to
// move a moving queue to its current owner cancels the move (the record
// returned is then active, at epoch + 1).
result<owner_record, std::string> request_move(metadata_store& store, const std::string& queue,
                                               const std::string& target);

// on: node `node` moves all its queues away and gets no new ones, until the
// drain is ended (on = false). Draining a node that is not a live member is
// refused (ending a drain is not).
result<bool, std::string> request_drain(metadata_store& store, const std::string& node, bool on);

} // namespace wharf::wlm
