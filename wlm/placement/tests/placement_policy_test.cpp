#include "wlm/placement/placement_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

namespace wharf::wlm {
namespace {

using state = node_load::state;

node_load node(std::string id, state st = state::active, uint64_t queues = 0,
               std::vector<std::string> groups = {}) {
    node_load n;
    n.node_id = std::move(id);
    n.st = st;
    n.queues = queues;
    n.groups = std::move(groups);
    return n;
}

std::vector<placement_rule> rules_of(const std::vector<std::string>& texts) {
    auto r = parse_placement_rules(texts);
    EXPECT_TRUE(r) << r.error();
    return r ? *r : std::vector<placement_rule>{};
}

// place() with defaults for what a test does not care about.
struct placer {
    std::vector<node_load> nodes;
    std::vector<placement_rule> rules;
    policy_kind policy = policy_kind::least_loaded;
    placement_weights weights;
    placement_state st;
    std::string local = "n1";

    result<placement_decision, std::string> operator()(std::string_view queue) {
        return place(queue, local, nodes, rules, policy, weights, st);
    }
    std::string node_for(std::string_view queue) {
        auto d = (*this)(queue);
        EXPECT_TRUE(d) << d.error();
        return d ? d->node : std::string("<error>");
    }
    std::string error_for(std::string_view queue) {
        auto d = (*this)(queue);
        EXPECT_FALSE(d) << "placed on " << d->node;
        return d ? std::string() : d.error();
    }
};

bool contains(const std::string& s, std::string_view fragment) {
    return s.find(fragment) != std::string::npos;
}

// ---- policy names ----

TEST(placement_policy_kind, parses_the_four_names_and_round_trips) {
    for (auto p : {policy_kind::least_loaded, policy_kind::round_robin,
                   policy_kind::consistent_hash, policy_kind::local}) {
        auto parsed = parse_policy_kind(to_string(p));
        ASSERT_TRUE(parsed) << parsed.error();
        EXPECT_EQ(*parsed, p);
    }
}

TEST(placement_policy_kind, unknown_name_lists_the_allowed_ones) {
    for (std::string_view bad : {"least_loaded", "Least-Loaded", "", "random"}) {
        auto r = parse_policy_kind(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_TRUE(contains(r.error(), "'" + std::string(bad) + "'")) << r.error();
        EXPECT_TRUE(contains(r.error(), "least-loaded, round-robin, consistent-hash, local"))
            << r.error();
    }
}

// ---- least-loaded ----

TEST(placement_least_loaded, picks_the_lowest_weighted_score) {
    placer p;
    auto a = node("n1", state::active, 2);  // 2.0
    auto b = node("n2");                    // 1000 messages * 0.001 = 1.0, + 5 conns * 0.1 = 1.5
    b.messages = 1000;
    b.connections = 5;
    auto c = node("n3");                    // rate 300 * 0.01 = 3.0
    c.message_rate = 300;
    p.nodes = {a, b, c};
    auto d = p("q");
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->node, "n2");
    EXPECT_EQ(d->reason, "least-loaded: n1=2.0 n2=1.5 n3=3.0 -> n2");

    p.weights.connections = 1.0; // n2 = 6.0 now
    EXPECT_EQ(p.node_for("q"), "n1");
}

TEST(placement_least_loaded, ties_go_to_the_lowest_node_id_whatever_the_input_order) {
    placer p;
    p.nodes = {node("n3"), node("n2", state::active, 3), node("n1")};
    auto d = p("q");
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->node, "n1");
    EXPECT_EQ(d->reason, "least-loaded: n1=0.0 n2=3.0 n3=0.0 -> n1");
}

TEST(placement_least_loaded, thirty_queues_spread_evenly_over_three_nodes) {
    load_table table;
    for (auto id : {"n1", "n2", "n3"})
        table.upsert(node(id));
    placer p;
    for (int i = 0; i < 30; ++i) {
        p.nodes = table.snapshot();
        auto d = p("queue." + std::to_string(i));
        ASSERT_TRUE(d) << d.error();
        ASSERT_TRUE(table.adjust_queues(d->node, 1));
        uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
        for (const auto& n : table.snapshot()) {
            lo = std::min(lo, n.queues);
            hi = std::max(hi, n.queues);
        }
        EXPECT_LE(hi - lo, 1u) << "after " << i + 1 << " queues";
    }
    for (const auto& n : table.snapshot())
        EXPECT_EQ(n.queues, 10u) << n.node_id;
}

TEST(placement_least_loaded, bad_weights_are_an_error) {
    placer p;
    p.nodes = {node("n1")};
    p.weights.messages = -1;
    EXPECT_TRUE(contains(p.error_for("q"), "placement weight messages must be a number from 0 to 1e9"));
    p.weights.messages = std::numeric_limits<double>::quiet_NaN();
    EXPECT_TRUE(contains(p.error_for("q"), "messages"));
    // So large that a score would be infinite (least-loaded then fell back
    // to node-id order and sent every queue to n1).
    p.weights.messages = 1e308;
    EXPECT_TRUE(contains(p.error_for("q"), "from 0 to 1e9"));
    EXPECT_FALSE(parse_weight("1e308"));
    EXPECT_TRUE(parse_weight("1e9"));
    EXPECT_TRUE(invalid_weights_reason(placement_weights{}).empty());
}

// ---- round-robin ----

TEST(placement_weights_text, weights_read_back_as_printed) {
    for (const char* text : {"1", "0.001", "1e-3", "0", "12.5"}) {
        auto w = parse_weight(text);
        ASSERT_TRUE(w) << text << ": " << w.error();
        auto again = parse_weight(format_score(*w));
        ASSERT_TRUE(again) << format_score(*w);
        EXPECT_EQ(*again, *w) << text;
    }
    EXPECT_EQ(format_score(1.0), "1.0");
    EXPECT_EQ(format_score(0.001), "0.001");
    for (const char* bad : {"", "-1", "abc", "1x", "nan", "inf", " 1"}) {
        auto w = parse_weight(bad);
        ASSERT_FALSE(w) << bad;
        EXPECT_NE(w.error().find(std::string("'") + bad + "'"), std::string::npos) << w.error();
    }
}

TEST(placement_round_robin, cycles_over_active_nodes_only) {
    placer p;
    p.policy = policy_kind::round_robin;
    p.nodes = {node("n1"), node("n2", state::draining), node("n3"), node("n4", state::down),
               node("n5")};
    std::vector<std::string> got;
    for (int i = 0; i < 6; ++i)
        got.push_back(p.node_for("q" + std::to_string(i)));
    EXPECT_EQ(got, (std::vector<std::string>{"n1", "n3", "n5", "n1", "n3", "n5"}));
}

TEST(placement_round_robin, reason_names_the_cycle_and_the_last_choice) {
    placer p;
    p.policy = policy_kind::round_robin;
    p.nodes = {node("n1"), node("n2")};
    auto first = p("a");
    ASSERT_TRUE(first);
    EXPECT_EQ(first->reason, "round-robin: cycle n1 n2 -> n1");
    auto second = p("b");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->reason, "round-robin: cycle n1 n2, last n1 -> n2");
}

TEST(placement_round_robin, membership_changes_keep_the_cycle_going) {
    placer p;
    p.policy = policy_kind::round_robin;
    p.nodes = {node("n1"), node("n2"), node("n3")};
    EXPECT_EQ(p.node_for("a"), "n1");
    EXPECT_EQ(p.node_for("b"), "n2");
    p.nodes[1].st = state::down; // the last choice goes down: continue after it
    EXPECT_EQ(p.node_for("c"), "n3");
    EXPECT_EQ(p.node_for("d"), "n1");
    p.nodes[1].st = state::active; // and comes back: it is next after n1
    EXPECT_EQ(p.node_for("e"), "n2");
}

TEST(placement_round_robin, each_group_rule_cycles_on_its_own) {
    placer p;
    p.policy = policy_kind::round_robin;
    p.nodes = {node("n1", state::active, 0, {"eu"}), node("n2", state::active, 0, {"eu"}),
               node("n3"), node("n4")};
    p.rules = rules_of({"eu.* -> group:eu"});
    EXPECT_EQ(p.node_for("eu.a"), "n1");
    EXPECT_EQ(p.node_for("x"), "n1");
    EXPECT_EQ(p.node_for("eu.b"), "n2");
    EXPECT_EQ(p.node_for("x"), "n2");
    EXPECT_EQ(p.node_for("eu.c"), "n1");
    EXPECT_EQ(p.node_for("x"), "n3");
}

// ---- consistent-hash ----

TEST(placement_consistent_hash, the_hash_is_pinned_so_every_build_agrees) {
    // If this changes, nodes built from different versions disagree on owners.
    // (Values cross-checked against an independent Python implementation.)
    EXPECT_EQ(rendezvous_hash("orders", "n1"), 0x073acb49c9744574ULL);
    EXPECT_EQ(rendezvous_hash("", ""), 0x7bd3144f29c0cc9eULL);
    EXPECT_NE(rendezvous_hash("a", "bc"), rendezvous_hash("ab", "c"));
}

TEST(placement_consistent_hash, is_stable_for_a_queue_and_independent_of_order_and_load) {
    placer p;
    p.policy = policy_kind::consistent_hash;
    p.nodes = {node("n1"), node("n2"), node("n3")};
    std::map<std::string, std::string> first;
    for (int i = 0; i < 50; ++i) {
        auto q = "queue." + std::to_string(i);
        first[q] = p.node_for(q);
    }
    std::reverse(p.nodes.begin(), p.nodes.end());
    p.nodes[0].queues = 1000;
    for (const auto& [q, owner] : first)
        EXPECT_EQ(p.node_for(q), owner) << q;
    auto d = p("queue.0");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->reason, "consistent-hash: rendezvous over n1 n2 n3 -> " + first["queue.0"]);
}

TEST(placement_consistent_hash, adding_a_node_moves_about_one_in_n_queues_all_to_it) {
    placer p;
    p.policy = policy_kind::consistent_hash;
    p.nodes = {node("n1"), node("n2"), node("n3")};
    constexpr int queues = 2000;
    std::vector<std::string> before;
    std::map<std::string, int> per_node;
    for (int i = 0; i < queues; ++i) {
        before.push_back(p.node_for("queue." + std::to_string(i)));
        ++per_node[before.back()];
    }
    for (const auto& [n, count] : per_node) // roughly a third each
        EXPECT_NEAR(count, queues / 3, queues / 10) << n;

    p.nodes.push_back(node("n4"));
    int moved = 0;
    for (int i = 0; i < queues; ++i) {
        auto now = p.node_for("queue." + std::to_string(i));
        if (now != before[i]) {
            ++moved;
            EXPECT_EQ(now, "n4") << "queue." << i << " moved between old nodes";
        }
    }
    EXPECT_NEAR(moved, queues / 4, queues / 20); // ~1/N of the queues, N = 4
}

TEST(placement_consistent_hash, ignores_down_and_draining_nodes) {
    placer p;
    p.policy = policy_kind::consistent_hash;
    p.nodes = {node("n1"), node("n2"), node("n3")};
    std::vector<std::string> before;
    for (int i = 0; i < 300; ++i)
        before.push_back(p.node_for("q" + std::to_string(i)));
    p.nodes[1].st = state::down;
    p.nodes[2].st = state::draining;
    for (int i = 0; i < 300; ++i)
        EXPECT_EQ(p.node_for("q" + std::to_string(i)), "n1");
    // With only n2 down, queues on n1 and n3 stay where they were.
    p.nodes[2].st = state::active;
    for (int i = 0; i < 300; ++i) {
        auto now = p.node_for("q" + std::to_string(i));
        EXPECT_NE(now, "n2");
        if (before[i] != "n2") {
            EXPECT_EQ(now, before[i]) << i;
        }
    }
}

// ---- local ----

TEST(placement_local, the_node_that_saw_the_first_use) {
    placer p;
    p.policy = policy_kind::local;
    p.nodes = {node("n1"), node("n2", state::active, 100), node("n3")};
    p.local = "n2";
    auto d = p("q");
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->node, "n2");
    EXPECT_EQ(d->reason, "local: first use at n2");
}

TEST(placement_local, fails_with_a_reason_when_the_local_node_cannot_take_it) {
    placer p;
    p.policy = policy_kind::local;
    p.nodes = {node("n1", state::draining), node("n2")};
    p.local = "n1";
    EXPECT_EQ(p.error_for("q"), "local: node n1, which saw the first use of 'q', is draining");
    p.local = "n9";
    EXPECT_EQ(p.error_for("q"), "local: node n9, which saw the first use of 'q', is not a known node");
    p.local = "";
    EXPECT_TRUE(contains(p.error_for("q"), "no local node was given"));
}

TEST(placement_local, outside_the_rule_group_is_an_error_not_a_fallback) {
    placer p;
    p.policy = policy_kind::local;
    p.nodes = {node("n1"), node("n2", state::active, 0, {"eu"})};
    p.rules = rules_of({"eu.* -> group:eu"});
    p.local = "n1";
    EXPECT_EQ(p.error_for("eu.q"), "rule 'eu.*' -> group eu; local within it: node n1, which saw "
                                   "the first use of 'eu.q', is not in group eu");
    p.local = "n2";
    EXPECT_EQ(p.node_for("eu.q"), "n2");
}

// ---- rules ----

TEST(placement_rules, a_matching_node_rule_beats_every_policy) {
    for (auto policy : {policy_kind::least_loaded, policy_kind::round_robin,
                        policy_kind::consistent_hash, policy_kind::local}) {
        placer p;
        p.policy = policy;
        p.nodes = {node("n1"), node("n2", state::active, 50), node("n3")};
        p.rules = rules_of({"orders.* -> node:n2"});
        auto d = p("orders.eu");
        ASSERT_TRUE(d) << d.error();
        EXPECT_EQ(d->node, "n2") << to_string(policy);
        EXPECT_EQ(d->reason, "rule 'orders.*' -> node n2");
        auto other = p("invoices");
        ASSERT_TRUE(other) << other.error();
        EXPECT_FALSE(contains(other->reason, "rule")) << other->reason;
    }
}

TEST(placement_rules, the_first_matching_rule_wins) {
    placer p;
    p.nodes = {node("n1"), node("n2"), node("n3")};
    p.rules = rules_of({"orders.vip.* -> node:n3", "orders.* -> node:n2"});
    EXPECT_EQ(p.node_for("orders.vip.1"), "n3");
    EXPECT_EQ(p.node_for("orders.std.1"), "n2");
    p.rules = rules_of({"orders.* -> node:n2", "orders.vip.* -> node:n3"});
    EXPECT_EQ(p.node_for("orders.vip.1"), "n2");
}

TEST(placement_rules, a_group_rule_runs_the_policy_within_the_group) {
    placer p;
    p.nodes = {node("n1"), node("n4", state::active, 4, {"eu"}), node("n5", state::active, 1, {"eu", "x"}),
               node("n6", state::down, 0, {"eu"})};
    p.rules = rules_of({"eu.* -> group:eu"});
    auto d = p("eu.orders");
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->node, "n5"); // n1 is emptier but not in the group; n6 is down
    EXPECT_EQ(d->reason, "rule 'eu.*' -> group eu; least-loaded within it: n4=4.0 n5=1.0 -> n5");
    EXPECT_EQ(p.node_for("us.orders"), "n1");

    p.policy = policy_kind::consistent_hash;
    for (int i = 0; i < 100; ++i) {
        auto n = p.node_for("eu.q" + std::to_string(i));
        EXPECT_TRUE(n == "n4" || n == "n5") << n;
    }
}

TEST(placement_rules, a_pinned_node_that_is_not_active_is_an_error_with_the_reason) {
    placer p;
    p.nodes = {node("n1"), node("n2", state::down), node("n3", state::draining)};
    p.rules = rules_of({"orders.* -> node:n2", "billing.* -> node:n3", "audit.* -> node:n9"});
    EXPECT_EQ(p.error_for("orders.eu"), "rule 'orders.*' pins the queue to node n2, which is down");
    EXPECT_EQ(p.error_for("billing.x"), "rule 'billing.*' pins the queue to node n3, which is draining");
    EXPECT_EQ(p.error_for("audit.x"), "rule 'audit.*' pins the queue to node n9, which is not a known node");
    EXPECT_EQ(p.node_for("other"), "n1");
}

TEST(placement_rules, a_group_without_active_nodes_is_an_error_not_a_fallback) {
    placer p;
    p.nodes = {node("n1"), node("n4", state::draining, 0, {"eu"}), node("n5", state::down, 0, {"eu"})};
    p.rules = rules_of({"eu.* -> group:eu", "apac.* -> group:apac"});
    EXPECT_EQ(p.error_for("eu.q"),
              "rule 'eu.*' pins the queue to group eu, which has no active node (n4 draining, n5 down)");
    EXPECT_EQ(p.error_for("apac.q"), "rule 'apac.*' pins the queue to group apac, which has no known nodes");
}

// ---- candidates and inputs ----

TEST(placement_candidates, draining_and_down_nodes_are_never_chosen) {
    for (auto policy : {policy_kind::least_loaded, policy_kind::round_robin,
                        policy_kind::consistent_hash}) {
        placer p;
        p.policy = policy;
        p.nodes = {node("n1", state::draining), node("n2", state::active, 1000), node("n3", state::down)};
        for (int i = 0; i < 20; ++i)
            EXPECT_EQ(p.node_for("q" + std::to_string(i)), "n2") << to_string(policy);
    }
}

TEST(placement_candidates, no_active_node_is_an_error) {
    placer p;
    p.nodes = {node("n1", state::draining), node("n2", state::down)};
    EXPECT_EQ(p.error_for("q"), "no active node to place queue 'q' on (n1 draining, n2 down)");
    p.nodes.clear();
    EXPECT_EQ(p.error_for("q"), "no node to place queue 'q' on: no nodes are known");
}

TEST(placement_candidates, invalid_load_figures_are_an_error) {
    placer p;
    p.nodes = {node("n1"), node("n1")};
    EXPECT_TRUE(contains(p.error_for("q"), "node n1 appears more than once"));
    p.nodes = {node("n1"), node("")};
    EXPECT_TRUE(contains(p.error_for("q"), "node id is empty"));
    p.nodes = {node("n1")};
    p.nodes[0].message_rate = std::numeric_limits<double>::quiet_NaN();
    EXPECT_TRUE(contains(p.error_for("q"), "message rate"));
}

} // namespace
} // namespace wharf::wlm
