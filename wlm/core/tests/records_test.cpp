#include "wlm/core/records.hpp"
#include "wlm/core/wlm_service.hpp"

#include <gtest/gtest.h>

namespace wharf::wlm {
namespace {

TEST(wlm_records, node_round_trip) {
    node_record n;
    n.host = "10.0.0.5";
    n.port = 5673;
    n.load.node_id = "n2";
    n.load.st = node_load::state::draining;
    n.load.groups = {"eu", "fast"};
    n.load.queues = 7;
    n.load.messages = 1234;
    n.load.connections = 9;
    auto back = decode_node("n2", encode(n));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->host, "10.0.0.5");
    EXPECT_EQ(back->port, 5673);
    EXPECT_EQ(back->load.node_id, "n2");
    EXPECT_EQ(back->load.st, node_load::state::draining);
    EXPECT_EQ(back->load.groups, (std::vector<std::string>{"eu", "fast"}));
    EXPECT_EQ(back->load.queues, 7u);
    EXPECT_EQ(back->load.messages, 1234u);
    EXPECT_EQ(back->load.connections, 9u);
}

TEST(wlm_records, owner_round_trip_keeps_the_reason) {
    owner_record o;
    o.node = "n3";
    o.epoch = 4;
    o.reason = "least-loaded: n1=1.0 n2=2.0 n3=0.0 -> n3";
    auto back = decode_owner(encode(o));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->node, "n3");
    EXPECT_EQ(back->epoch, 4u);
    EXPECT_FALSE(back->moving());
    EXPECT_EQ(back->reason, o.reason);
}

TEST(wlm_records, a_moving_owner_names_its_successor_and_reasons_stay_one_field) {
    owner_record o;
    o.node = "n1";
    o.epoch = 7;
    o.st = owner_record::state::moving;
    o.to = "n2";
    o.reason = "drain; operator=alice";
    auto back = decode_owner(encode(o));
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->moving());
    EXPECT_EQ(back->to, "n2");
    EXPECT_EQ(back->epoch, 7u);
    EXPECT_EQ(back->reason, "drain, operator=alice");
    // A record written before moves existed reads as active.
    auto old = decode_owner("node=n1;epoch=2;reason=local");
    ASSERT_TRUE(old);
    EXPECT_FALSE(old->moving());
    // Moving without a successor is not a record.
    EXPECT_FALSE(decode_owner("node=n1;epoch=2;state=moving;reason=x"));
}

TEST(wlm_records, garbage_is_refused) {
    EXPECT_FALSE(decode_node("n1", "state=active"));
    EXPECT_FALSE(decode_node("n1", "addr=nohostport"));
    EXPECT_FALSE(decode_node("n1", "addr=h:notaport"));
    EXPECT_FALSE(decode_owner("node=n1"));
    EXPECT_FALSE(decode_owner("node=n1;epoch=x"));
}

TEST(wlm_records, placement_keeps_the_old_policy_only_form_and_adds_weights) {
    // What nodes wrote before weights existed reads the same.
    auto old = decode_placement("policy=round-robin");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->policy, policy_kind::round_robin);
    EXPECT_FALSE(old->weights);
    placement_record p;
    p.policy = policy_kind::least_loaded;
    EXPECT_EQ(encode(p), "policy=least-loaded"); // so those nodes still read a policy-only change

    p.weights = placement_weights{2, 0.5, 0, 0.25};
    auto back = decode_placement(encode(p));
    ASSERT_TRUE(back) << encode(p);
    EXPECT_EQ(back->policy, policy_kind::least_loaded);
    ASSERT_TRUE(back->weights);
    EXPECT_EQ(back->weights->queues, 2);
    EXPECT_EQ(back->weights->messages, 0.5);
    EXPECT_EQ(back->weights->message_rate, 0);
    EXPECT_EQ(back->weights->connections, 0.25);

    p.policy.reset(); // weights only: each node keeps its configured policy
    back = decode_placement(encode(p));
    ASSERT_TRUE(back) << encode(p);
    EXPECT_FALSE(back->policy);
    EXPECT_TRUE(back->weights);

    EXPECT_FALSE(decode_placement("policy=random"));
    EXPECT_FALSE(decode_placement("policy=local;weight-queues=1")); // some weights only
    EXPECT_FALSE(decode_placement(
        "weight-queues=-1;weight-messages=0;weight-message-rate=0;weight-connections=0"));
}

TEST(wlm_options, parse_and_errors_name_the_key) {
    plugins::options ok{{"placement", {"consistent-hash"}},
                        {"rules", {"orders.* -> node:n2"}},
                        {"lease-ttl", {"2.5"}},
                        {"groups", {"eu"}}};
    auto o = parse_wlm_options(ok);
    ASSERT_TRUE(o) << o.error();
    EXPECT_EQ(o->policy, policy_kind::consistent_hash);
    EXPECT_EQ(o->rules.size(), 1u);
    EXPECT_EQ(o->lease_ttl.count(), 2500);
    EXPECT_EQ(o->groups, (std::vector<std::string>{"eu"}));

    auto bad_policy = parse_wlm_options({{"placement", {"random"}}});
    ASSERT_FALSE(bad_policy);
    EXPECT_NE(bad_policy.error().find("plugin.wlm.placement"), std::string::npos) << bad_policy.error();
    auto bad_rule = parse_wlm_options({{"rules", {"orders.* => n2"}}});
    ASSERT_FALSE(bad_rule);
    EXPECT_NE(bad_rule.error().find("plugin.wlm.rules"), std::string::npos) << bad_rule.error();
    auto bad_ttl = parse_wlm_options({{"lease-ttl", {"-1"}}});
    ASSERT_FALSE(bad_ttl);
    EXPECT_NE(bad_ttl.error().find("plugin.wlm.lease-ttl"), std::string::npos) << bad_ttl.error();
    auto bad_group = parse_wlm_options({{"groups", {"eu;node=n2"}}});
    ASSERT_FALSE(bad_group);
    EXPECT_NE(bad_group.error().find("plugin.wlm.groups"), std::string::npos) << bad_group.error();
    for (const char* target : {"node:n1;mode=x", "group:g,h", "node:a/b"}) {
        auto bad_target = parse_wlm_options({{"rules", {std::string("orders.* -> ") + target}}});
        ASSERT_FALSE(bad_target) << target;
        EXPECT_NE(bad_target.error().find("plugin.wlm.rules"), std::string::npos) << bad_target.error();
    }
    auto unknown = parse_wlm_options({{"lease-tll", {"1"}}});
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().find("unknown key"), std::string::npos) << unknown.error();
}

TEST(wlm_options, placement_weights_are_keys_of_their_own) {
    auto dflt = parse_wlm_options({});
    ASSERT_TRUE(dflt);
    EXPECT_EQ(dflt->weights.queues, placement_weights{}.queues);
    auto o = parse_wlm_options({{"weight-queues", {"2"}},
                                {"weight-messages", {"0.5"}},
                                {"weight-message-rate", {"0"}},
                                {"weight-connections", {"1e-3"}}});
    ASSERT_TRUE(o) << o.error();
    EXPECT_EQ(o->weights.queues, 2);
    EXPECT_EQ(o->weights.messages, 0.5);
    EXPECT_EQ(o->weights.message_rate, 0);
    EXPECT_EQ(o->weights.connections, 0.001);
    for (const char* key : {"weight-queues", "weight-messages", "weight-message-rate", "weight-connections"}) {
        auto bad = parse_wlm_options({{key, {"-0.5"}}});
        ASSERT_FALSE(bad) << key;
        EXPECT_NE(bad.error().find(std::string("plugin.wlm.") + key + ": '-0.5' is not a number >= 0"),
                  std::string::npos)
            << bad.error();
    }
}

TEST(wlm_options, serving_mode_defaults_to_relay_and_rules_pick_per_address) {
    auto dflt = parse_wlm_options({});
    ASSERT_TRUE(dflt);
    EXPECT_EQ(dflt->mode_for("orders"), wlm_options::serve_mode::relay);

    auto o = parse_wlm_options({{"mode", {"redirect"}},
                                {"mode-rules", {"fast.* -> relay", "  audit.?  ->  redirect "}}});
    ASSERT_TRUE(o) << o.error();
    EXPECT_EQ(o->mode_for("orders"), wlm_options::serve_mode::redirect);
    EXPECT_EQ(o->mode_for("fast.eu.1"), wlm_options::serve_mode::relay);
    EXPECT_EQ(o->mode_for("audit.1"), wlm_options::serve_mode::redirect);

    auto bad_mode = parse_wlm_options({{"mode", {"proxy"}}});
    ASSERT_FALSE(bad_mode);
    EXPECT_NE(bad_mode.error().find("plugin.wlm.mode: 'proxy'"), std::string::npos) << bad_mode.error();
    for (const char* bad : {"fast.* relay", "-> relay", "fast.* -> teleport"}) {
        auto r = parse_wlm_options({{"mode-rules", {bad}}});
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().find("plugin.wlm.mode-rules"), std::string::npos) << r.error();
    }
}

TEST(wlm_options, reassign_after_and_park_timeout_are_seconds) {
    auto o = parse_wlm_options({{"reassign-after", {"2.5"}}, {"park-timeout", {"4"}}});
    ASSERT_TRUE(o) << o.error();
    ASSERT_TRUE(o->reassign_after.has_value());
    EXPECT_EQ(o->reassign_after->count(), 2500);
    EXPECT_EQ(o->park_timeout.count(), 4000);
    EXPECT_FALSE(parse_wlm_options({})->reassign_after.has_value()); // default: wait for the node
    auto bad = parse_wlm_options({{"reassign-after", {"soon"}}});
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().find("plugin.wlm.reassign-after"), std::string::npos) << bad.error();
}

TEST(wlm_options, durations_over_a_year_or_not_finite_are_refused_naming_the_key) {
    for (const char* key : {"lease-ttl", "poll-interval", "reassign-after", "park-timeout"}) {
        for (const char* v : {"1e10", "31536000.5", "inf", "1e300", "nan"}) {
            auto r = parse_wlm_options({{key, {v}}});
            ASSERT_FALSE(r) << key << " = " << v;
            EXPECT_NE(r.error().find(std::string("plugin.wlm.") + key), std::string::npos) << r.error();
        }
        auto year = parse_wlm_options({{key, {"31536000"}}}); // the most allowed
        ASSERT_TRUE(year) << key << ": " << year.error();
    }
    auto r = parse_wlm_options({{"reassign-after", {"1e10"}}});
    EXPECT_NE(r.error().find("more than a year"), std::string::npos) << r.error();
    EXPECT_EQ(parse_wlm_options({{"reassign-after", {"31536000"}}})->reassign_after->count(), 31536000000);
}

TEST(wlm_options, seconds_are_written_as_people_write_them) {
    using std::chrono::milliseconds;
    EXPECT_EQ(seconds_text(milliseconds(2000)), "2");
    EXPECT_EQ(seconds_text(milliseconds(2500)), "2.5");
    EXPECT_EQ(seconds_text(milliseconds(50)), "0.05");
    EXPECT_EQ(seconds_text(milliseconds(31536000000)), "31536000");
}

} // namespace
TEST(wlm_records, settings_round_trip_with_a_dead_letter_name_holding_separators) {
    plugins::queue_settings s;
    s.max_depth = 10;
    s.max_delivery_count = 0;
    s.overflow = "reject";
    s.dead_letter_address = "odd;name=x";
    auto back = decode_settings(encode(s));
    EXPECT_EQ(back.max_depth, 10u);
    EXPECT_FALSE(back.max_depth_bytes);
    EXPECT_EQ(back.max_delivery_count, 0u);
    EXPECT_EQ(back.overflow, "reject");
    EXPECT_EQ(back.dead_letter_address, "odd;name=x");
    EXPECT_TRUE(decode_settings("").empty());
    EXPECT_FALSE(decode_settings("overflow=sideways").overflow); // unreadable: unset
}

} // namespace wharf::wlm
