#include "wlm/placement/placement_policy.hpp"

#include "broker/common/text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace wharf::wlm {

namespace {

using candidates = std::vector<const node_load*>; // sorted by node id

std::string join_ids(const candidates& c) {
    std::string out;
    for (const auto* n : c) {
        if (!out.empty())
            out += ' ';
        out += n->node_id;
    }
    return out;
}

// "n4 draining, n5 down"
std::string describe_states(const candidates& c) {
    std::string out;
    for (const auto* n : c) {
        if (!out.empty())
            out += ", ";
        out += n->node_id;
        out += ' ';
        out += to_string(n->st);
    }
    return out;
}

bool in_group(const node_load& n, std::string_view group) {
    return std::find(n.groups.begin(), n.groups.end(), group) != n.groups.end();
}

struct choice {
    std::string node;
    std::string detail; // the policy's part of the reason, after "<policy>: "
};

choice least_loaded(const candidates& c, const placement_weights& w) {
    const node_load* best = nullptr;
    double best_score = 0;
    std::string scores;
    for (const auto* n : c) { // sorted by id, so '<' keeps the lowest id on ties
        double s = load_score(*n, w);
        if (!scores.empty())
            scores += ' ';
        scores += n->node_id + "=" + format_score(s);
        if (!best || s < best_score) {
            best = n;
            best_score = s;
        }
    }
    return {best->node_id, scores + " -> " + best->node_id};
}

choice round_robin(const candidates& c, const std::string& scope, placement_state& state) {
    auto it = state.round_robin_last.find(scope);
    const node_load* next = c.front();
    std::string detail = "cycle " + join_ids(c);
    if (it != state.round_robin_last.end()) {
        detail += ", last " + it->second;
        for (const auto* n : c) {
            if (n->node_id > it->second) {
                next = n;
                break;
            }
        }
    }
    state.round_robin_last[scope] = next->node_id;
    return {next->node_id, detail + " -> " + next->node_id};
}

choice consistent_hash(const candidates& c, std::string_view queue) {
    const node_load* best = nullptr;
    uint64_t best_hash = 0;
    for (const auto* n : c) { // sorted by id, so '>' keeps the lowest id on ties
        uint64_t h = rendezvous_hash(queue, n->node_id);
        if (!best || h > best_hash) {
            best = n;
            best_hash = h;
        }
    }
    return {best->node_id, "rendezvous over " + join_ids(c) + " -> " + best->node_id};
}

// Checks what place() must not trust blindly: ids, figures, duplicates.
std::string invalid_nodes_reason(const std::vector<node_load>& nodes) {
    std::set<std::string_view> seen;
    for (const auto& n : nodes) {
        if (auto why = invalid_load_reason(n); !why.empty())
            return "invalid load figures: " + why;
        if (!seen.insert(n.node_id).second)
            return "invalid load figures: node " + n.node_id + " appears more than once";
    }
    return {};
}

} // namespace

std::string_view to_string(policy_kind p) {
    switch (p) {
    case policy_kind::least_loaded: return "least-loaded";
    case policy_kind::round_robin: return "round-robin";
    case policy_kind::consistent_hash: return "consistent-hash";
    case policy_kind::local: return "local";
    }
    return "unknown";
}

result<policy_kind, std::string> parse_policy_kind(std::string_view name) {
    for (auto p : {policy_kind::least_loaded, policy_kind::round_robin,
                   policy_kind::consistent_hash, policy_kind::local})
        if (name == to_string(p))
            return p;
    return fail("unknown placement policy " + quoted(name) +
                "; expected one of: least-loaded, round-robin, consistent-hash, local");
}

std::string invalid_weights_reason(const placement_weights& w) {
    struct named {
        const char* name;
        double value;
    };
    for (auto [name, value] : {named{"queues", w.queues}, named{"messages", w.messages},
                               named{"message_rate", w.message_rate},
                               named{"connections", w.connections}})
        if (!std::isfinite(value) || value < 0 || value > max_weight)
            return std::string("placement weight ") + name + " must be a number from 0 to 1e9, not " +
                   format_score(value);
    return {};
}

std::string format_score(double v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    if (ec != std::errc{})
        return "?";
    std::string s(buf, end);
    if (s.find_first_of(".en") == std::string::npos) // 'n' for nan/inf
        s += ".0";
    return s;
}

result<double, std::string> parse_weight(std::string_view text) {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
        return fail(quoted(text) + " is not a number >= 0");
    if (v > max_weight) return fail(quoted(text) + " is more than the largest weight, 1e9 (scores must stay finite)");
    return v;
}

double load_score(const node_load& n, const placement_weights& w) {
    return w.queues * static_cast<double>(n.queues) + w.messages * static_cast<double>(n.messages) +
           w.message_rate * n.message_rate + w.connections * static_cast<double>(n.connections);
}

uint64_t rendezvous_hash(std::string_view queue, std::string_view node) {
    constexpr uint64_t fnv_offset = 0xcbf29ce484222325ULL;
    constexpr uint64_t fnv_prime = 0x100000001b3ULL;
    uint64_t h = fnv_offset;
    auto mix_byte = [&](unsigned char b) {
        h ^= b;
        h *= fnv_prime;
    };
    // len(queue) as 8 little-endian bytes, then queue, then node: unambiguous.
    uint64_t len = queue.size();
    for (int i = 0; i < 8; ++i)
        mix_byte(static_cast<unsigned char>(len >> (8 * i)));
    for (char c : queue)
        mix_byte(static_cast<unsigned char>(c));
    for (char c : node)
        mix_byte(static_cast<unsigned char>(c));
    // MurmurHash3 fmix64: FNV-1a alone avalanches poorly in the high bits.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

result<placement_decision, std::string> place(std::string_view queue, std::string_view local_node,
                                              const std::vector<node_load>& nodes,
                                              const std::vector<placement_rule>& rules,
                                              policy_kind policy, const placement_weights& w,
                                              placement_state& state) {
    if (auto why = invalid_nodes_reason(nodes); !why.empty())
        return fail(std::move(why));

    candidates all;
    all.reserve(nodes.size());
    for (const auto& n : nodes)
        all.push_back(&n);
    std::sort(all.begin(), all.end(),
              [](const node_load* a, const node_load* b) { return a->node_id < b->node_id; });

    auto active_of = [](const candidates& c) {
        candidates out;
        for (const auto* n : c)
            if (n->st == node_load::state::active)
                out.push_back(n);
        return out;
    };

    const placement_rule* rule = first_matching_rule(rules, queue);
    candidates cands;
    std::string prefix; // "rule 'eu.*' -> group eu; " when a group rule applies
    std::string scope;  // round-robin scope
    if (!rule) {
        cands = active_of(all);
        if (cands.empty()) {
            if (all.empty())
                return fail("no node to place queue " + quoted(queue) + " on: no nodes are known");
            return fail("no active node to place queue " + quoted(queue) + " on (" +
                        describe_states(all) + ")");
        }
    } else if (rule->target == placement_rule::target_kind::node) {
        std::string head = "rule " + quoted(rule->pattern) + " pins the queue to node " +
                           rule->target_name + ", which ";
        auto it = std::find_if(all.begin(), all.end(), [&](const node_load* n) {
            return n->node_id == rule->target_name;
        });
        if (it == all.end())
            return fail(head + "is not a known node");
        if ((*it)->st != node_load::state::active)
            return fail(head + "is " + std::string(to_string((*it)->st)));
        return placement_decision{rule->target_name,
                                  "rule " + quoted(rule->pattern) + " -> node " + rule->target_name};
    } else {
        candidates members;
        for (const auto* n : all)
            if (in_group(*n, rule->target_name))
                members.push_back(n);
        std::string head = "rule " + quoted(rule->pattern) + " pins the queue to group " +
                           rule->target_name + ", ";
        if (members.empty())
            return fail(head + "which has no known nodes");
        cands = active_of(members);
        if (cands.empty())
            return fail(head + "which has no active node (" + describe_states(members) + ")");
        prefix = "rule " + quoted(rule->pattern) + " -> group " + rule->target_name + "; ";
        scope = rule->to_string();
    }

    std::string name(to_string(policy));
    std::string label = rule ? prefix + name + " within it: " : name + ": ";
    choice c;
    switch (policy) {
    case policy_kind::least_loaded:
        if (auto why = invalid_weights_reason(w); !why.empty())
            return fail(std::move(why));
        c = least_loaded(cands, w);
        break;
    case policy_kind::round_robin:
        c = round_robin(cands, scope, state);
        break;
    case policy_kind::consistent_hash:
        c = consistent_hash(cands, queue);
        break;
    case policy_kind::local: {
        if (local_node.empty())
            return fail(label + "no local node was given for queue " + quoted(queue));
        std::string head = label + "node " + std::string(local_node) + ", which saw the first use of " +
                           quoted(queue) + ", ";
        auto known = std::find_if(all.begin(), all.end(),
                                  [&](const node_load* n) { return n->node_id == local_node; });
        if (known == all.end())
            return fail(head + "is not a known node");
        if ((*known)->st != node_load::state::active)
            return fail(head + "is " + std::string(to_string((*known)->st)));
        if (std::find(cands.begin(), cands.end(), *known) == cands.end())
            return fail(head + "is not in group " + rule->target_name);
        c = {std::string(local_node), "first use at " + std::string(local_node)};
        break;
    }
    }
    return placement_decision{c.node, label + c.detail};
}

} // namespace wharf::wlm
