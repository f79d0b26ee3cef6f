#include "wlm/placement/placement_rule.hpp"

#include <gtest/gtest.h>

namespace wharf::wlm {
namespace {

TEST(placement_glob, star_matches_any_run_including_dots_and_nothing) {
    EXPECT_TRUE(glob_match("orders.*", "orders.eu"));
    EXPECT_TRUE(glob_match("orders.*", "orders.eu.1"));
    EXPECT_TRUE(glob_match("orders.*", "orders."));
    EXPECT_FALSE(glob_match("orders.*", "orders"));
    EXPECT_FALSE(glob_match("orders.*", "xorders.eu"));
    EXPECT_TRUE(glob_match("*", ""));
    EXPECT_TRUE(glob_match("*", "anything.at.all"));
    EXPECT_TRUE(glob_match("**", "a"));
    EXPECT_TRUE(glob_match("*.dlq", "orders.eu.dlq"));
    EXPECT_FALSE(glob_match("*.dlq", "orders.eu.dlq2"));
    EXPECT_TRUE(glob_match("a*b*c", "axxbyyc"));
    EXPECT_TRUE(glob_match("a*b*c", "abcbc"));
    EXPECT_FALSE(glob_match("a*b*c", "axxbyy"));
}

TEST(placement_glob, question_mark_matches_exactly_one_character) {
    EXPECT_TRUE(glob_match("q?", "q1"));
    EXPECT_TRUE(glob_match("q?", "q."));
    EXPECT_FALSE(glob_match("q?", "q"));
    EXPECT_FALSE(glob_match("q?", "q12"));
    EXPECT_TRUE(glob_match("?*", "x"));
    EXPECT_FALSE(glob_match("?*", ""));
}

TEST(placement_glob, literals_are_exact_and_case_sensitive) {
    EXPECT_TRUE(glob_match("orders", "orders"));
    EXPECT_FALSE(glob_match("orders", "Orders"));
    EXPECT_FALSE(glob_match("orders", "orders2"));
    EXPECT_TRUE(glob_match("", ""));
    EXPECT_FALSE(glob_match("", "a"));
}

TEST(placement_glob, pathological_pattern_stays_fast) {
    std::string text(10000, 'a');
    std::string pattern;
    for (int i = 0; i < 50; ++i)
        pattern += "*a";
    pattern += "b";
    EXPECT_FALSE(glob_match(pattern, text));
}

TEST(placement_rule_parse, node_and_group_targets) {
    auto r = parse_placement_rule("orders.* -> node:n2");
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->pattern, "orders.*");
    EXPECT_EQ(r->target, placement_rule::target_kind::node);
    EXPECT_EQ(r->target_name, "n2");
    EXPECT_EQ(r->to_string(), "orders.* -> node:n2");

    auto g = parse_placement_rule("  eu.*->group: eu  ");
    ASSERT_TRUE(g) << g.error();
    EXPECT_EQ(g->pattern, "eu.*");
    EXPECT_EQ(g->target, placement_rule::target_kind::group);
    EXPECT_EQ(g->target_name, "eu");
    EXPECT_TRUE(g->matches("eu.orders"));
    EXPECT_FALSE(g->matches("us.orders"));
}

void expect_error(std::string_view text, std::string_view fragment) {
    auto r = parse_placement_rule(text);
    ASSERT_FALSE(r) << "parsed: " << text;
    EXPECT_NE(r.error().find(fragment), std::string::npos)
        << "error for '" << text << "' was: " << r.error();
}

TEST(placement_rule_parse, errors_say_what_is_wrong) {
    expect_error("", "empty rule");
    expect_error("   ", "empty rule");
    expect_error("orders.* node:n2", "no '->'");
    expect_error("orders.* node:n2", "'orders.* node:n2'");
    expect_error("a -> node:n1 -> node:n2", "more than one '->'");
    expect_error(" -> node:n2", "pattern before '->' is empty");
    expect_error("my orders -> node:n2", "pattern 'my orders' contains a space");
    expect_error("orders.* ->", "target after '->' is empty");
    expect_error("orders.* -> n2", "target 'n2' has no kind");
    expect_error("orders.* -> host:n2", "unknown target kind 'host'");
    expect_error("orders.* -> node:", "node name after 'node:' is empty");
    expect_error("orders.* -> group:  ", "group name after 'group:' is empty");
    expect_error("orders.* -> group:e u", "group name 'e u' contains a space");
}

TEST(placement_rule_parse, list_error_names_the_entry) {
    auto ok = parse_placement_rules({"a.* -> node:n1", "b.* -> group:g"});
    ASSERT_TRUE(ok) << ok.error();
    ASSERT_EQ(ok->size(), 2u);
    EXPECT_EQ((*ok)[1].target_name, "g");

    auto bad = parse_placement_rules({"a.* -> node:n1", "b.* => group:g"});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().rfind("entry 2: rule 'b.* => group:g'", 0), 0u) << bad.error();
}

TEST(placement_rule_match, first_matching_rule_wins) {
    auto rules = parse_placement_rules(
        {"orders.eu.* -> group:eu", "orders.* -> node:n2", "orders.eu.x -> node:n3"});
    ASSERT_TRUE(rules) << rules.error();
    const auto* r = first_matching_rule(*rules, "orders.eu.x");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->target_name, "eu");
    r = first_matching_rule(*rules, "orders.us");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->target_name, "n2");
    EXPECT_EQ(first_matching_rule(*rules, "invoices"), nullptr);
    EXPECT_EQ(first_matching_rule({}, "orders.us"), nullptr);
}

} // namespace
} // namespace wharf::wlm
