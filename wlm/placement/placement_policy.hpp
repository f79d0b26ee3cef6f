#pragma once
// placement_policy: decides which node owns a new queue, from the nodes'
// load figures (load_table), the placement rules (placement_rule) and the
// cluster's policy. Pure: no I/O, no clock, no threads; the same inputs give
// the same decision on every node and every build. The only state is the
// round-robin cursor in placement_state, which the caller owns.
//
// Threads: none; call from one thread at a time per placement_state.

#include "broker/common/result.hpp"
#include "wlm/placement/load_table.hpp"
#include "wlm/placement/placement_rule.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::wlm {

enum class policy_kind { least_loaded, round_robin, consistent_hash, local };

// "least-loaded", "round-robin", "consistent-hash", "local".
std::string_view to_string(policy_kind p);

// Parses one of the names above (exact, lower case); the error lists them.
result<policy_kind, std::string> parse_policy_kind(std::string_view name);

// least-loaded score = w.queues*queues + w.messages*messages
//                    + w.message_rate*message_rate + w.connections*connections.
struct placement_weights {
    double queues = 1.0;
    double messages = 0.001;
    double message_rate = 0.01;
    double connections = 0.1;
};

// Why the weights are unusable (a weight negative or not finite), or empty.
std::string invalid_weights_reason(const placement_weights& w);
// The largest weight taken: with any larger, a node's score could overflow
// to infinity, and least-loaded would fall back to node-id order.
inline constexpr double max_weight = 1e9;

double load_score(const node_load& n, const placement_weights& w);

// A score or weight as text, as the reasons print it: the shortest form that
// reads back as the same double, always with a decimal point or exponent
// ("0.0", "3.1", "0.001").
std::string format_score(double v);

// A weight from text: a finite decimal number >= 0 ("1", "0.001", "1e-3");
// the error says why not and quotes the text.
result<double, std::string> parse_weight(std::string_view text);

// Stable 64-bit hash of (queue, node) for rendezvous hashing: FNV-1a over a
// length-prefixed encoding, then a MurmurHash3 finaliser. Identical on every
// build and platform (unlike std::hash).
uint64_t rendezvous_hash(std::string_view queue, std::string_view node);

// Caller-owned state between decisions: the round-robin cursor, i.e. the last
// node round-robin chose, per scope ("" when no rule matched, else the rule's
// to_string(), so each group cycles on its own). The next choice is the
// first candidate, by id, after the last one, wrapping; nodes that join or
// leave do not disturb the cycle of the others.
struct placement_state {
    std::map<std::string, std::string, std::less<>> round_robin_last;
};

struct placement_decision {
    std::string node;
    // Policy or rule, and how it decided, for management to show, e.g.
    // "least-loaded: n1=0.0 n2=3.0 n3=3.0 -> n1" or
    // "rule 'eu.*' -> group eu; least-loaded within it: n4=1.0 n5=0.0 -> n5".
    std::string reason;
};

// Chooses the owner of a new queue.
//  - nodes: every known node whatever its state (load_table::snapshot());
//    only active ones are candidates, the others are named in errors.
//  - local_node: the node that saw the queue's first use (for policy local).
//  - rules: the first rule matching queue wins. A node rule decides alone; a
//    group rule runs the policy among the group's active nodes. If a rule's
//    targets are not active the decision fails with the reason; it never
//    falls back to other nodes.
//  - With no matching rule the policy chooses among all active nodes.
//  - least-loaded: lowest load_score wins, ties to the lowest node id.
//    round-robin: see placement_state. consistent-hash: rendezvous, highest
//    rendezvous_hash(queue, node) wins (ties to the lowest id). local:
//    local_node, if it is an active candidate.
// Fails, with a sentence saying why, when no candidate is active, when the
// inputs are invalid (empty or duplicate node ids, bad figures or weights),
// or as above.
result<placement_decision, std::string> place(std::string_view queue, std::string_view local_node,
                                              const std::vector<node_load>& nodes,
                                              const std::vector<placement_rule>& rules,
                                              policy_kind policy, const placement_weights& w,
                                              placement_state& state);

} // namespace wharf::wlm
