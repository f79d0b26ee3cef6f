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

namespace wharf::wlm {

struct cluster_view {
    std::map<std::string, node_record> nodes;    // live members (a down node has no record)
    std::map<std::string, owner_record> owners;  // queue -> owner
    std::set<std::string> drains;                // nodes an operator asked to drain
};

result<cluster_view, std::string> read_cluster(metadata_store& store);

// Asks the owner of `queue` to hand it to `target`. Refused when the queue
// has no owner, the owner or the target is not a live member, the target is
// draining, or the queue is already there or already moving elsewhere.
// Asking again for a move in progress to the same target is fine.
result<owner_record, std::string> request_move(metadata_store& store, const std::string& queue,
                                               const std::string& target);

// on: node `node` moves all its queues away and gets no new ones, until the
// drain is ended (on = false). Draining a node that is not a live member is
// refused (ending a drain is not).
result<bool, std::string> request_drain(metadata_store& store, const std::string& node, bool on);

} // namespace wharf::wlm
