#include "wlm/core/rebalance.hpp"

#include <algorithm>
#include <optional>

namespace wharf::wlm {

namespace {
bool cluster_queue(const std::string& q) { return !q.empty() && q[0] != '$'; }

// The active nodes a queue may be placed on under its rule, by id.
std::vector<std::string> allowed_nodes(const std::string& queue, const std::vector<const node_load*>& active,
                                       const std::vector<placement_rule>& rules) {
    const placement_rule* rule = first_matching_rule(rules, queue);
    std::vector<std::string> out;
    for (const auto* n : active) {
        const bool ok = rule == nullptr ||
                        (rule->target == placement_rule::target_kind::node
                             ? n->node_id == rule->target_name
                             : std::find(n->groups.begin(), n->groups.end(), rule->target_name) != n->groups.end());
        if (ok) out.push_back(n->node_id);
    }
    return out;
}
} // namespace

std::vector<rebalance_move> plan_rebalance(const std::vector<node_load>& nodes,
                                           const std::map<std::string, owner_record>& owners,
                                           const std::vector<placement_rule>& rules, size_t max_moves) {
    std::vector<const node_load*> active;
    for (const auto& n : nodes)
        if (n.st == node_load::state::active) active.push_back(&n);
    std::sort(active.begin(), active.end(), [](auto* a, auto* b) { return a->node_id < b->node_id; });

    std::map<std::string, int64_t> count; // active node -> queues it owns (or is taking over)
    for (const auto* n : active) count[n->node_id] = 0;
    // active node -> its queues that may move, with where each may go
    std::map<std::string, std::map<std::string, std::vector<std::string>>> movable;
    for (const auto& [q, o] : owners) {
        if (!cluster_queue(q)) continue;
        auto c = count.find(o.moving() ? o.to : o.node);
        if (c == count.end()) continue; // on a draining or down node
        ++c->second;
        if (!o.moving()) movable[o.node][q] = allowed_nodes(q, active, rules);
    }

    std::vector<rebalance_move> plan;
    while (plan.size() < max_moves) {
        std::vector<std::string> sources;
        for (const auto& [id, c] : count) sources.push_back(id);
        std::stable_sort(sources.begin(), sources.end(),
                         [&](const std::string& a, const std::string& b) { return count[a] > count[b]; });
        std::optional<rebalance_move> next;
        for (const auto& src : sources) {
            int64_t best = 0;
            for (const auto& [q, targets] : movable[src]) {
                for (const auto& t : targets) {
                    if (t == src || count[src] - count[t] < 2) continue;
                    if (!next || count[t] < best) {
                        next = rebalance_move{q, src, t};
                        best = count[t];
                    }
                }
            }
            if (next) break;
        }
        if (!next) break;
        --count[next->from];
        ++count[next->to];
        movable[next->from].erase(next->queue);
        plan.push_back(std::move(*next));
    }
    return plan;
}

std::string describe(const std::vector<rebalance_move>& plan) {
    std::string out;
    for (const auto& m : plan) out += (out.empty() ? "" : ",") + m.queue + ":" + m.from + "->" + m.to;
    return out;
}

} // namespace wharf::wlm
