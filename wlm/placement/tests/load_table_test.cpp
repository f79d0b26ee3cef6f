#include "wlm/placement/load_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace wharf::wlm {
namespace {

node_load node(std::string id, node_load::state st = node_load::state::active, uint64_t queues = 0) {
    node_load n;
    n.node_id = std::move(id);
    n.st = st;
    n.queues = queues;
    return n;
}

TEST(placement_load_table, upsert_replaces_the_figures_of_a_node) {
    load_table t;
    EXPECT_TRUE(t.upsert(node("n1", node_load::state::active, 3)));
    EXPECT_TRUE(t.upsert(node("n1", node_load::state::draining, 5)));
    ASSERT_EQ(t.size(), 1u);
    ASSERT_NE(t.find("n1"), nullptr);
    EXPECT_EQ(t.find("n1")->queues, 5u);
    EXPECT_EQ(t.find("n1")->st, node_load::state::draining);
    EXPECT_EQ(t.find("n2"), nullptr);
}

TEST(placement_load_table, rejects_invalid_figures) {
    load_table t;
    EXPECT_FALSE(t.upsert(node("")));
    auto n = node("n1");
    n.message_rate = std::numeric_limits<double>::quiet_NaN();
    EXPECT_FALSE(t.upsert(n));
    n.message_rate = -1;
    EXPECT_FALSE(t.upsert(n));
    n.message_rate = std::numeric_limits<double>::infinity();
    EXPECT_FALSE(t.upsert(n));
    EXPECT_EQ(t.size(), 0u);
    EXPECT_NE(invalid_load_reason(n).find("n1"), std::string::npos);
}

TEST(placement_load_table, live_nodes_are_the_active_ones_sorted_by_id) {
    load_table t;
    t.upsert(node("n3"));
    t.upsert(node("n1", node_load::state::down));
    t.upsert(node("n2", node_load::state::draining));
    t.upsert(node("n0"));
    auto live = t.live_nodes();
    ASSERT_EQ(live.size(), 2u);
    EXPECT_EQ(live[0].node_id, "n0");
    EXPECT_EQ(live[1].node_id, "n3");
    auto all = t.snapshot();
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[1].node_id, "n1");
    EXPECT_EQ(all[1].st, node_load::state::down);
}

TEST(placement_load_table, remove_and_set_state) {
    load_table t;
    t.upsert(node("n1"));
    EXPECT_TRUE(t.set_state("n1", node_load::state::down));
    EXPECT_TRUE(t.live_nodes().empty());
    EXPECT_FALSE(t.set_state("n9", node_load::state::active));
    EXPECT_TRUE(t.remove("n1"));
    EXPECT_FALSE(t.remove("n1"));
    EXPECT_EQ(t.size(), 0u);
}

TEST(placement_load_table, adjust_queues_saturates_at_zero) {
    load_table t;
    t.upsert(node("n1", node_load::state::active, 2));
    EXPECT_TRUE(t.adjust_queues("n1", 3));
    EXPECT_EQ(t.find("n1")->queues, 5u);
    EXPECT_TRUE(t.adjust_queues("n1", -4));
    EXPECT_EQ(t.find("n1")->queues, 1u);
    EXPECT_TRUE(t.adjust_queues("n1", std::numeric_limits<int64_t>::min()));
    EXPECT_EQ(t.find("n1")->queues, 0u);
    EXPECT_FALSE(t.adjust_queues("n2", 1));
}

TEST(placement_load_table, state_names) {
    EXPECT_EQ(to_string(node_load::state::active), "active");
    EXPECT_EQ(to_string(node_load::state::draining), "draining");
    EXPECT_EQ(to_string(node_load::state::down), "down");
}

} // namespace
} // namespace wharf::wlm
