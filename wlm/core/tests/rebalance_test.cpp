// plan_rebalance: which moves even out the queue counts, within what the
// rules allow, and what it must leave alone.
#include "wlm/core/rebalance.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace wharf::wlm {
namespace {

node_load node(const std::string& id, node_load::state st = node_load::state::active,
               std::vector<std::string> groups = {}) {
    node_load n;
    n.node_id = id;
    n.st = st;
    n.groups = std::move(groups);
    return n;
}

owner_record owned_by(const std::string& id) {
    owner_record o;
    o.node = id;
    o.epoch = 1;
    return o;
}

// Queue counts per node after the plan, counting moving queues at their target.
std::map<std::string, int> counts_after(const std::map<std::string, owner_record>& owners,
                                        const std::vector<rebalance_move>& plan) {
    std::map<std::string, std::string> where;
    for (const auto& [q, o] : owners) where[q] = o.moving() ? o.to : o.node;
    for (const auto& m : plan) {
        EXPECT_EQ(where[m.queue], m.from) << m.queue;
        where[m.queue] = m.to;
    }
    std::map<std::string, int> out;
    for (const auto& [q, n] : where) ++out[n];
    return out;
}

std::map<std::string, owner_record> queues_on(const std::string& id, int n, const std::string& prefix = "q") {
    std::map<std::string, owner_record> out;
    for (int i = 0; i < n; ++i) out[prefix + std::to_string(i)] = owned_by(id);
    return out;
}

TEST(rebalance, queues_all_on_one_node_spread_until_counts_differ_by_at_most_one) {
    const auto owners = queues_on("n1", 10);
    auto plan = plan_rebalance({node("n1"), node("n2"), node("n3")}, owners, {}, 16);
    EXPECT_EQ(plan.size(), 6u);
    EXPECT_EQ(counts_after(owners, plan), (std::map<std::string, int>{{"n1", 4}, {"n2", 3}, {"n3", 3}}));
    std::set<std::string> moved;
    for (const auto& m : plan) EXPECT_TRUE(moved.insert(m.queue).second) << m.queue << " moves twice";
    // Deterministic: the least-loaded target first, lowest names first.
    EXPECT_EQ(describe(plan), "q0:n1->n2,q1:n1->n3,q2:n1->n2,q3:n1->n3,q4:n1->n2,q5:n1->n3");
}

TEST(rebalance, a_balanced_cluster_needs_no_move) {
    auto owners = queues_on("n1", 2, "a");
    owners.merge(queues_on("n2", 1, "b"));
    owners.merge(queues_on("n3", 2, "c"));
    EXPECT_TRUE(plan_rebalance({node("n1"), node("n2"), node("n3")}, owners, {}, 16).empty());
    EXPECT_EQ(describe({}), "");
}

TEST(rebalance, max_moves_caps_the_plan) {
    auto plan = plan_rebalance({node("n1"), node("n2"), node("n3")}, queues_on("n1", 10), {}, 2);
    EXPECT_EQ(describe(plan), "q0:n1->n2,q1:n1->n3");
}

TEST(rebalance, draining_and_down_nodes_neither_give_nor_take) {
    auto owners = queues_on("n1", 6, "a");
    owners.merge(queues_on("n2", 5, "b")); // draining: the drain moves these
    owners.merge(queues_on("n9", 5, "c")); // down: no live record
    auto plan = plan_rebalance({node("n1"), node("n2", node_load::state::draining), node("n3")}, owners, {}, 16);
    EXPECT_EQ(plan.size(), 3u);
    for (const auto& m : plan) {
        EXPECT_EQ(m.from, "n1");
        EXPECT_EQ(m.to, "n3");
    }
}

TEST(rebalance, queues_already_moving_stay_and_count_at_their_target) {
    auto owners = queues_on("n1", 4);
    for (const char* q : {"q0", "q1"}) {
        owners[q].st = owner_record::state::moving;
        owners[q].to = "n2";
    }
    // n1 2, n2 2 (both arriving), n3 0: one move from n1 or n2 to n3, not of a moving queue.
    auto plan = plan_rebalance({node("n1"), node("n2"), node("n3")}, owners, {}, 16);
    ASSERT_EQ(plan.size(), 1u);
    EXPECT_EQ(describe(plan), "q2:n1->n3");
}

TEST(rebalance, a_queue_pinned_to_a_node_stays_and_a_group_rule_keeps_moves_in_the_group) {
    auto owners = queues_on("n1", 4, "pinned.");
    owners.merge(queues_on("n1", 4, "eu."));
    const std::vector<placement_rule> rules{
        {"pinned.*", placement_rule::target_kind::node, "n1"},
        {"eu.*", placement_rule::target_kind::group, "eu"},
    };
    auto plan = plan_rebalance({node("n1", node_load::state::active, {"eu"}), node("n2"),
                                node("n3", node_load::state::active, {"eu"})},
                               owners, rules, 16);
    // Only the eu.* queues may leave n1, and only for n3 (n2 is not in group eu).
    for (const auto& m : plan) {
        EXPECT_EQ(m.queue.rfind("eu.", 0), 0u) << m.queue;
        EXPECT_EQ(m.to, "n3");
    }
    auto after = counts_after(owners, plan);
    EXPECT_EQ(after["n1"], 4); // the pinned ones: n2 stays empty, the rules allow nothing better
    EXPECT_EQ(after["n3"], 4);
    EXPECT_EQ(after.count("n2"), 0u);
}

TEST(rebalance, a_queue_pinned_elsewhere_may_move_to_its_node) {
    // A route added after placement: "late.*" now belongs on n2.
    auto owners = queues_on("n1", 3, "late.");
    auto plan = plan_rebalance({node("n1"), node("n2")}, owners,
                               {{"late.*", placement_rule::target_kind::node, "n2"}}, 16);
    EXPECT_EQ(describe(plan), "late.0:n1->n2");
}

TEST(rebalance, temporary_queues_are_ignored) {
    auto owners = queues_on("n1", 3, "$dynamic.n1.");
    EXPECT_TRUE(plan_rebalance({node("n1"), node("n2")}, owners, {}, 16).empty());
}

} // namespace
} // namespace wharf::wlm
