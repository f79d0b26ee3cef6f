#pragma once
// rebalance: plans the queue moves that even out how many queues each
// active node owns (wharf.placement REBALANCE). Pure: the same cluster view
// gives the same plan on every node. The caller issues the moves with
// request_move and the owners carry them out at their next tick
// (handover.cpp), as for an operator's MOVE.
//
// Threads: none; any thread.

#include "wlm/core/records.hpp"
#include "wlm/placement/load_table.hpp"
#include "wlm/placement/placement_rule.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace wharf::wlm {

struct rebalance_move {
    std::string queue;
    std::string from;
    std::string to;
};

// Plans at most max_moves moves.
//  - nodes: the live nodes (placement_loads()); only active ones take part.
//    Their `queues` figure is not used: counts come from `owners`, where a
//    moving queue counts at its next owner.
//  - owners: queue -> owner record, every queue of the cluster. Queues
//    already moving stay as they are, and so do queues on draining or down
//    nodes (a drain or reassign-after moves those) and '$' names (not the
//    cluster's).
//  - rules: routes then configured rules, first match wins, as placement
//    uses them. A queue may go only where its rule allows (its node, or an
//    active node of its group); with no rule, to any active node.
// Greedy: take the most-loaded node that has a queue it may give to a node
// with at least two queues fewer, move the queue whose best target is the
// least loaded (ties: lowest queue name, then lowest node id), and repeat
// until no such move is left: then the counts differ by at most one, unless
// rules prevent it. Every move lowers the sum of squared counts, so the plan
// ends; each queue moves at most once.
std::vector<rebalance_move> plan_rebalance(const std::vector<node_load>& nodes,
                                           const std::map<std::string, owner_record>& owners,
                                           const std::vector<placement_rule>& rules, size_t max_moves);

// "q1:n1->n3,q2:n1->n2" ("" for no moves).
std::string describe(const std::vector<rebalance_move>& plan);

} // namespace wharf::wlm
