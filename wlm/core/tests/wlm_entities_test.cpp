// The WLM's management entity types over a real SQLite metadata file: what
// QUERY shows, and MOVE / DRAIN answering with the right condition.
#include "wlm/core/cluster_admin.hpp"
#include "wlm/core/wlm_entities.hpp"
#include "wlm/metadata/tests/store_fixture.hpp"

#include <gtest/gtest.h>

namespace wharf::wlm {
namespace {

class wlm_entities_test : public sqlite_metadata_store_test {
  protected:
    void SetUp() override {
        sqlite_metadata_store_test::SetUp();
        shared_ = std::make_shared<shared_store>();
        shared_->store = open_store();
        ASSERT_TRUE(shared_->store);
        auto& st = *shared_->store;
        const lease_id lease = st.grant_lease(std::chrono::seconds(10)).value();
        for (const char* id : {"n1", "n2"}) {
            node_record n;
            n.host = "127.0.0.1";
            n.port = 5672;
            n.load.node_id = id;
            n.load.queues = 1;
            ASSERT_TRUE(st.compare_and_set(std::string(nodes_prefix) + id, 0, encode(n), lease));
        }
        owner_record o;
        o.node = "n1";
        o.epoch = 2;
        o.reason = "round-robin";
        ASSERT_TRUE(st.compare_and_set(std::string(owners_prefix) + "orders", 0, encode(o)));
    }
    static std::string text(const plugins::entity& e, const std::string& key) {
        auto it = e.find(key);
        return it != e.end() && std::holds_alternative<std::string>(it->second) ? std::get<std::string>(it->second)
                                                                               : std::string("<none>");
    }
    std::shared_ptr<shared_store> shared_;
};

TEST_F(wlm_entities_test, owners_are_queried_with_their_epoch_and_reason) {
    owner_entities owners(shared_);
    auto all = owners.query();
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 1u);
    const auto& e = all->front();
    EXPECT_EQ(text(e, "name"), "orders");
    EXPECT_EQ(text(e, "node"), "n1");
    EXPECT_EQ(std::get<int64_t>(e.at("epoch")), 2);
    EXPECT_EQ(text(e, "state"), "active");
    EXPECT_EQ(text(e, "reason"), "round-robin");
    for (const auto& [k, v] : e) EXPECT_NE(std::find(owners.attribute_names().begin(),
                                                     owners.attribute_names().end(), k),
                                           owners.attribute_names().end()) << k;
}

TEST_F(wlm_entities_test, move_starts_a_move_and_bad_requests_get_conditions) {
    owner_entities owners(shared_);
    auto moved = owners.invoke("MOVE", "orders", {{"node", std::string("n2")}});
    ASSERT_TRUE(moved) << moved.error().description;
    EXPECT_EQ(text(*moved, "state"), "moving");
    EXPECT_EQ(text(*moved, "to"), "n2");

    auto no_arg = owners.invoke("MOVE", "orders", {});
    ASSERT_FALSE(no_arg);
    EXPECT_EQ(no_arg.error().code, errc::invalid_field);
    auto wrong_type = owners.invoke("MOVE", "orders", {{"node", int64_t{2}}});
    ASSERT_FALSE(wrong_type);
    EXPECT_EQ(wrong_type.error().code, errc::invalid_field);
    auto unknown = owners.invoke("MOVE", "nothing", {{"node", std::string("n2")}});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, errc::not_found);
    auto elsewhere = owners.invoke("MOVE", "orders", {{"node", std::string("n1")}});
    ASSERT_FALSE(elsewhere); // already moving to n2
    EXPECT_EQ(elsewhere.error().code, errc::not_allowed);
    auto bad_op = owners.invoke("DELETE", "orders", {});
    ASSERT_FALSE(bad_op);
    EXPECT_EQ(bad_op.error().code, errc::not_implemented);
    EXPECT_NE(bad_op.error().description.find("MOVE"), std::string::npos);
}

TEST_F(wlm_entities_test, drain_shows_in_the_node_entities) {
    node_entities nodes(shared_);
    ASSERT_TRUE(nodes.invoke("DRAIN", "n2", {}));
    auto all = nodes.query();
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ(text((*all)[1], "name"), "n2");
    EXPECT_EQ(text((*all)[1], "state"), "draining");
    EXPECT_TRUE(std::get<bool>((*all)[1].at("draining")));
    EXPECT_EQ(text((*all)[0], "state"), "active");
    auto ghost = nodes.invoke("DRAIN", "n9", {});
    ASSERT_FALSE(ghost);
    EXPECT_EQ(ghost.error().code, errc::not_allowed);
    ASSERT_TRUE(nodes.invoke("UNDRAIN", "n2", {}));
    EXPECT_EQ(text(nodes.query()->at(1), "state"), "active");
}

TEST_F(wlm_entities_test, a_node_that_owns_queues_but_is_not_live_shows_as_down) {
    owner_record o;
    o.node = "n7"; // no membership record
    o.epoch = 3;
    ASSERT_TRUE(shared_->store->compare_and_set(std::string(owners_prefix) + "stranded", 0, encode(o)));
    node_entities nodes(shared_);
    auto all = nodes.query();
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 3u);
    EXPECT_EQ(text(all->back(), "name"), "n7");
    EXPECT_EQ(text(all->back(), "state"), "down");
    EXPECT_FALSE(std::get<bool>(all->back().at("draining")));
}

} // namespace
} // namespace wharf::wlm
