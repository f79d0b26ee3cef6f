// The WLM's management entity types over a real SQLite metadata file: what
// QUERY shows, MOVE / DRAIN answering with the right condition, placement's
// weights and REBALANCE.
#include "wlm/core/cluster_admin.hpp"
#include "wlm/core/wlm_entities.hpp"
#include "wlm/metadata/tests/store_fixture.hpp"

#include <gtest/gtest.h>

#include <limits>

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
        granted_at_ = clock_->load();
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
    static int64_t number(const plugins::entity& e, const std::string& key) {
        auto it = e.find(key);
        return it != e.end() && std::holds_alternative<int64_t>(it->second) ? std::get<int64_t>(it->second) : -1;
    }
    void own(const std::string& queue, const std::string& node) {
        owner_record o;
        o.node = node;
        o.epoch = 1;
        ASSERT_TRUE(shared_->store->compare_and_set(std::string(owners_prefix) + queue, 0, encode(o)));
    }
    std::map<std::string, std::string> moving_to() {
        std::map<std::string, std::string> out;
        auto view = read_cluster(*shared_->store);
        EXPECT_TRUE(view);
        if (!view) return out;
        for (const auto& [q, o] : view->owners)
            if (o.moving()) out[q] = o.to;
        return out;
    }
    std::shared_ptr<shared_store> shared_;
    int64_t granted_at_ = 0;
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
    auto elsewhere = owners.invoke("MOVE", "orders", {{"node", std::string("n9")}});
    ASSERT_FALSE(elsewhere); // already moving to n2
    EXPECT_EQ(elsewhere.error().code, errc::not_allowed);
    EXPECT_NE(elsewhere.error().description.find("already moving from n1 to n2"), std::string::npos);
    // Back to the owner: the move is cancelled.
    auto back = owners.invoke("MOVE", "orders", {{"node", std::string("n1")}});
    ASSERT_TRUE(back) << back.error().description;
    EXPECT_EQ(text(*back, "state"), "active");
    EXPECT_EQ(text(*back, "node"), "n1");
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

TEST_F(wlm_entities_test, live_nodes_show_their_lease_expiry_and_load_score_down_nodes_null) {
    own("stranded", "n7"); // n7 has no membership record: down
    node_entities nodes(shared_);
    auto all = nodes.query();
    ASSERT_TRUE(all) << all.error().description;
    ASSERT_EQ(all->size(), 3u);
    // n1 owns "orders": with the default weights its score is 1 queue.
    EXPECT_EQ(number((*all)[0], "leaseExpiry"), granted_at_ + 10000);
    EXPECT_EQ(text((*all)[0], "loadScore"), "1.0");
    EXPECT_EQ(number((*all)[1], "leaseExpiry"), granted_at_ + 10000);
    EXPECT_EQ(text((*all)[1], "loadScore"), "0.0");
    EXPECT_EQ(text((*all)[2], "name"), "n7");
    EXPECT_FALSE(all->back().count("leaseExpiry")); // shown as null
    EXPECT_FALSE(all->back().count("loadScore"));
}

TEST_F(wlm_entities_test, placement_shows_the_weights_and_update_changes_them_for_every_node) {
    placement_entities placement(shared_, placement_config{});
    auto read = placement.query();
    ASSERT_TRUE(read);
    const auto& p = read->front();
    EXPECT_EQ(text(p, "policy"), "least-loaded");
    EXPECT_EQ(text(p, "weightQueues"), "1.0");
    EXPECT_EQ(text(p, "weightMessages"), "0.001");
    EXPECT_EQ(text(p, "weightMessageRate"), "0.01");
    EXPECT_EQ(text(p, "weightConnections"), "0.1");
    EXPECT_EQ(text(p, "weightsSource"), "config");

    auto changed = placement.invoke("UPDATE", "placement",
                                    {{"weightQueues", int64_t{3}}, {"weightMessages", std::string("0.5")}});
    ASSERT_TRUE(changed) << changed.error().description;
    EXPECT_EQ(text(*changed, "weightQueues"), "3.0");
    EXPECT_EQ(text(*changed, "weightMessages"), "0.5");
    EXPECT_EQ(text(*changed, "weightConnections"), "0.1"); // not given: kept
    EXPECT_EQ(text(*changed, "weightsSource"), "management");
    EXPECT_EQ(text(*changed, "source"), "config"); // the policy was not changed
    // What every node reads back from the store.
    auto rec = decode_placement((*shared_->store->get(placement_key))->value);
    ASSERT_TRUE(rec && rec->weights);
    EXPECT_EQ(rec->weights->queues, 3);
    EXPECT_FALSE(rec->policy);
    // The node scores follow: n1 owns one queue.
    EXPECT_EQ(text(node_entities(shared_).query()->front(), "loadScore"), "3.0");
    // A policy change keeps the weights.
    ASSERT_TRUE(placement.invoke("UPDATE", "placement", {{"policy", std::string("round-robin")}}));
    EXPECT_EQ(text(placement.query()->front(), "weightQueues"), "3.0");
    EXPECT_EQ(text(placement.query()->front(), "policy"), "round-robin");
    // A floating-point number (an AMQP double) is a weight as its text is.
    auto doubled = placement.invoke("UPDATE", "placement", {{"weightConnections", 0.25}});
    ASSERT_TRUE(doubled) << doubled.error().description;
    EXPECT_EQ(text(*doubled, "weightConnections"), "0.25");

    for (const auto& [attr, bad] : std::vector<std::pair<std::string, plugins::attribute_value>>{
             {"weightConnections", std::string("-1")},
             {"weightMessages", std::string("lots")},
             {"weightQueues", int64_t{-2}},
             {"weightMessageRate", true},
             {"weightMessages", -0.5},
             {"weightMessages", 1e308},
             {"weightQueues", int64_t{2000000000}},
             {"weightQueues", std::numeric_limits<double>::infinity()},
             {"weightConnections", std::numeric_limits<double>::quiet_NaN()}}) {
        auto r = placement.invoke("UPDATE", "placement", {{attr, bad}});
        ASSERT_FALSE(r) << attr;
        EXPECT_EQ(r.error().code, errc::invalid_field);
        EXPECT_NE(r.error().description.find("'" + attr + "'"), std::string::npos) << r.error().description;
    }
    auto nothing = placement.invoke("UPDATE", "placement", {});
    ASSERT_FALSE(nothing);
    EXPECT_EQ(nothing.error().code, errc::invalid_field);
    EXPECT_EQ(text(placement.query()->front(), "weightQueues"), "3.0"); // no bad update changed anything
}

TEST_F(wlm_entities_test, rebalance_plans_issues_moves_and_a_dry_run_only_plans) {
    for (int i = 0; i < 5; ++i) own("q" + std::to_string(i), "n1"); // n1: 6 queues with "orders", n2: none
    placement_entities placement(shared_, placement_config{});
    auto dry = placement.invoke("REBALANCE", "placement", {{"dryRun", true}});
    ASSERT_TRUE(dry) << dry.error().description;
    EXPECT_EQ(number(*dry, "moves"), 3);
    EXPECT_EQ(text(*dry, "plan"), "orders:n1->n2,q0:n1->n2,q1:n1->n2");
    EXPECT_TRUE(moving_to().empty());

    auto capped = placement.invoke("REBALANCE", "placement", {{"max", int64_t{2}}});
    ASSERT_TRUE(capped) << capped.error().description;
    EXPECT_EQ(number(*capped, "moves"), 2);
    EXPECT_EQ(moving_to(), (std::map<std::string, std::string>{{"orders", "n2"}, {"q0", "n2"}}));
    // The moves under way count at n2: one more evens it out (4 / 2 -> 3 / 3).
    auto rest = placement.invoke("REBALANCE", "placement", {});
    ASSERT_TRUE(rest) << rest.error().description;
    EXPECT_EQ(text(*rest, "plan"), "q1:n1->n2");
    EXPECT_EQ(number(*placement.invoke("REBALANCE", "placement", {}), "moves"), 0);

    for (const auto& args : std::vector<plugins::entity>{{{"max", int64_t{0}}},
                                                         {{"max", std::string("16")}},
                                                         {{"max", int64_t{1001}}},
                                                         {{"dryRun", std::string("yes")}}}) {
        auto r = placement.invoke("REBALANCE", "placement", args);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().code, errc::invalid_field);
        EXPECT_NE(r.error().description.find(args.begin()->first), std::string::npos) << r.error().description;
    }
}

TEST_F(wlm_entities_test, a_route_target_cannot_carry_fields_of_its_own) {
    route_entities routes(shared_);
    // Each would have been stored as a record with fields the name smuggled in.
    for (const auto& [key, target] : std::vector<std::pair<std::string, std::string>>{
             {"group", "g;node=n2"},
             {"node", "n1;mode=bogus"},
             {"group", "a,b"},
             {"group", "g=h"},
             {"group", std::string("g\x01")},
             {"node", "n 1"},
             {"node", "n/1"}}) {
        auto r = routes.invoke("CREATE", "inj.*", {{key, target}});
        ASSERT_FALSE(r) << key << "=" << target;
        EXPECT_EQ(r.error().code, errc::invalid_field);
        EXPECT_NE(r.error().description.find("'" + key + "'"), std::string::npos) << r.error().description;
        EXPECT_NE(r.error().description.find(target), std::string::npos) << r.error().description;
    }
    EXPECT_TRUE(routes.query()->empty()); // nothing was stored
    // Names within the rules are stored and read back as given.
    ASSERT_TRUE(routes.invoke("CREATE", "inj.*", {{"group", std::string("east-1.a_b")}}));
    auto bad = routes.invoke("UPDATE", "inj.*", {{"node", std::string("n2;mode=relay")}});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, errc::invalid_field);
    auto all = routes.query();
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ(text(all->front(), "group"), "east-1.a_b");
    EXPECT_EQ(text(all->front(), "node"), "<none>");
    EXPECT_EQ(text(all->front(), "mode"), "<none>");
}

TEST_F(wlm_entities_test, create_and_update_refuse_arguments_they_do_not_take) {
    const auto refused = [](const result<plugins::entity, error>& r, const std::string& words) {
        ASSERT_FALSE(r) << words;
        EXPECT_EQ(r.error().code, errc::invalid_field);
        EXPECT_NE(r.error().description.find(words), std::string::npos) << r.error().description;
    };
    // A cluster queue's CREATE: a misspelt setting places nothing.
    owner_entities queues(shared_, "wharf.queue",
                          [](const std::string&, const std::string&) -> result<std::pair<std::string, std::string>, error> {
                              return std::pair<std::string, std::string>{"n2", "test"};
                          });
    refused(queues.invoke("CREATE", "qa", {{"maxDepht", int64_t{5}}}), "'maxDepht' is not a setting CREATE can set");
    EXPECT_EQ(queues.query()->size(), 1u); // only "orders"
    ASSERT_TRUE(queues.invoke("CREATE", "qa", {{"maxDepth", int64_t{5}}, {"node", std::string("n2")}}));

    route_entities routes(shared_);
    refused(routes.invoke("CREATE", "r.*", {{"node", std::string("n1")}, {"mdoe", std::string("relay")}}), "'mdoe'");
    EXPECT_TRUE(routes.query()->empty());
    ASSERT_TRUE(routes.invoke("CREATE", "r.*", {{"node", std::string("n1")}}));
    refused(routes.invoke("UPDATE", "r.*", {{"mdoe", std::string("relay")}}), "'mdoe' is not an argument of wharf.route");
    refused(routes.invoke("UPDATE", "r.*", {}), "UPDATE of a wharf.route changes one of: node, group, mode");
    // Request properties are not arguments.
    ASSERT_TRUE(routes.invoke("UPDATE", "r.*", {{"mode", std::string("redirect")}, {"type", std::string("wharf.route")}}));
    EXPECT_EQ(text(routes.query()->front(), "mode"), "redirect");

    placement_entities placement(shared_, placement_config{});
    refused(placement.invoke("UPDATE", "placement", {{"weightQueue", int64_t{3}}}), "'weightQueue'");
    refused(placement.invoke("UPDATE", "placement", {{"policy", std::string("round-robin")}, {"polcy", int64_t{1}}}),
            "'polcy' is not a setting");
    EXPECT_EQ(text(placement.query()->front(), "weightQueues"), "1.0"); // nothing changed
    EXPECT_EQ(text(placement.query()->front(), "policy"), "least-loaded");
}

TEST_F(wlm_entities_test, a_node_that_is_not_listed_cannot_be_updated) {
    node_entities nodes(shared_);
    for (const auto& [op, args] : std::vector<std::pair<std::string, plugins::entity>>{
             {"UPDATE", {{"state", std::string("active")}}},
             {"UPDATE", {{"state", std::string("draining")}}},
             {"UNDRAIN", {}}}) {
        auto r = nodes.invoke(op, "ghost", args);
        ASSERT_FALSE(r) << op;
        EXPECT_EQ(r.error().code, errc::not_found) << op;
        EXPECT_NE(r.error().description.find("'ghost'"), std::string::npos) << r.error().description;
    }
    EXPECT_EQ(nodes.query()->size(), 2u); // n1 and n2: the ghost was not made up
    // A listed node still answers, changed or not.
    auto same = nodes.invoke("UPDATE", "n1", {{"state", std::string("active")}});
    ASSERT_TRUE(same) << same.error().description;
    EXPECT_FALSE(std::get<bool>(same->at("changed")));
    // A node that is down but owns queues is listed, so it can be undrained.
    own("kept", "n7");
    ASSERT_TRUE(nodes.invoke("UNDRAIN", "n7", {}));
}

} // namespace
} // namespace wharf::wlm
