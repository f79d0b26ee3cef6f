// cluster_admin against a real SQLite metadata file: move and drain
// requests are written only when they can be carried out, and say why not.
#include "wlm/core/cluster_admin.hpp"
#include "wlm/metadata/tests/store_fixture.hpp"

#include <gtest/gtest.h>

namespace wharf::wlm {
namespace {

class cluster_admin_test : public sqlite_metadata_store_test {
  protected:
    void SetUp() override {
        sqlite_metadata_store_test::SetUp();
        store_ = open_store();
        ASSERT_TRUE(store_);
        lease_ = store_->grant_lease(std::chrono::seconds(10)).value();
        for (const char* id : {"n1", "n2", "n3"}) member(id, node_load::state::active);
        owner_record o;
        o.node = "n1";
        o.epoch = 3;
        o.reason = "least-loaded";
        put_owner("orders", o);
    }
    void member(const std::string& id, node_load::state st) {
        node_record n;
        n.host = "127.0.0.1";
        n.port = 5672;
        n.load.node_id = id;
        n.load.st = st;
        const std::string key = std::string(nodes_prefix) + id;
        auto cur = store_->get(key).value();
        ASSERT_TRUE(store_->compare_and_set(key, cur ? cur->version : 0, encode(n), lease_));
    }
    void put_owner(const std::string& q, const owner_record& o) {
        const std::string key = std::string(owners_prefix) + q;
        auto cur = store_->get(key).value();
        ASSERT_TRUE(store_->compare_and_set(key, cur ? cur->version : 0, encode(o)));
    }
    owner_record owner(const std::string& q) {
        auto kv = store_->get(std::string(owners_prefix) + q).value();
        EXPECT_TRUE(kv.has_value());
        return kv ? decode_owner(kv->value).value_or(owner_record{}) : owner_record{};
    }

    std::unique_ptr<sqlite_metadata_store> store_;
    lease_id lease_ = 0;
};

TEST_F(cluster_admin_test, a_move_marks_the_owner_moving_and_keeps_its_epoch) {
    auto r = request_move(*store_, "orders", "n2");
    ASSERT_TRUE(r) << r.error();
    const auto o = owner("orders");
    EXPECT_EQ(o.node, "n1");      // the owner serves until the hand-over ends
    EXPECT_TRUE(o.moving());
    EXPECT_EQ(o.to, "n2");
    EXPECT_EQ(o.epoch, 3u);       // the new owner's epoch comes with the flip
    // Asking again for the same move is fine; for another target it is not.
    EXPECT_TRUE(request_move(*store_, "orders", "n2"));
    auto other = request_move(*store_, "orders", "n3");
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().find("already moving from n1 to n2"), std::string::npos) << other.error();
}

TEST_F(cluster_admin_test, a_move_back_to_the_owner_cancels_the_move_under_way) {
    ASSERT_TRUE(request_move(*store_, "orders", "n2"));
    auto back = request_move(*store_, "orders", "n1");
    ASSERT_TRUE(back) << back.error();
    EXPECT_FALSE(back->moving());
    const auto o = owner("orders");
    EXPECT_EQ(o.node, "n1");
    EXPECT_FALSE(o.moving());
    EXPECT_EQ(o.epoch, 4u); // as an abandoned move: the owner's copy is the one served from now on
    EXPECT_NE(o.reason.find("move to n2 cancelled"), std::string::npos) << o.reason;
    // Now it is an ordinary queue on n1 again.
    auto same = request_move(*store_, "orders", "n1");
    ASSERT_FALSE(same);
    EXPECT_NE(same.error().find("already on node n1"), std::string::npos);
}

TEST_F(cluster_admin_test, moves_that_cannot_happen_are_refused_and_change_nothing) {
    auto no_owner = request_move(*store_, "nobody", "n2");
    ASSERT_FALSE(no_owner);
    EXPECT_NE(no_owner.error().find("has no owner"), std::string::npos);
    auto same = request_move(*store_, "orders", "n1");
    ASSERT_FALSE(same);
    EXPECT_NE(same.error().find("already on node n1"), std::string::npos);
    auto unknown = request_move(*store_, "orders", "n9");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().find("'n9' is not a live member"), std::string::npos);
    ASSERT_TRUE(request_drain(*store_, "n3", true));
    auto draining = request_move(*store_, "orders", "n3");
    ASSERT_FALSE(draining);
    EXPECT_NE(draining.error().find("draining"), std::string::npos);
    EXPECT_FALSE(owner("orders").moving());
}

TEST_F(cluster_admin_test, a_queue_whose_owner_is_down_cannot_be_moved) {
    owner_record o;
    o.node = "n7"; // no membership record: down
    o.epoch = 1;
    put_owner("stranded", o);
    auto r = request_move(*store_, "stranded", "n2");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("n7, which is down"), std::string::npos) << r.error();
}

TEST_F(cluster_admin_test, drain_and_undrain_are_recorded_and_shown) {
    auto on = request_drain(*store_, "n2", true);
    ASSERT_TRUE(on);
    EXPECT_TRUE(*on);
    EXPECT_FALSE(*request_drain(*store_, "n2", true)); // already draining
    auto view = read_cluster(*store_);
    ASSERT_TRUE(view);
    EXPECT_EQ(view->drains.count("n2"), 1u);
    EXPECT_EQ(view->owners.at("orders").node, "n1");
    EXPECT_TRUE(*request_drain(*store_, "n2", false));
    EXPECT_FALSE(*request_drain(*store_, "n2", false));
    EXPECT_TRUE(read_cluster(*store_)->drains.empty());
    auto ghost = request_drain(*store_, "n9", true);
    ASSERT_FALSE(ghost);
    EXPECT_NE(ghost.error().find("not a live member"), std::string::npos);
}

} // namespace
} // namespace wharf::wlm
