#include "wlm/placement/placement_rule.hpp"

#include "broker/common/names.hpp"
#include "broker/common/text.hpp"

namespace wharf::wlm {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_space(s.back()))
        s.remove_suffix(1);
    return s;
}

bool has_space(std::string_view s) {
    for (char c : s)
        if (is_space(c))
            return true;
    return false;
}

failure<std::string> rule_error(std::string_view text, std::string_view what) {
    return fail("rule " + quoted(trim(text)) + ": " + std::string(what));
}

constexpr std::string_view expected_form =
    "expected '<pattern> -> node:<id>' or '<pattern> -> group:<name>'";

} // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
    // Greedy with backtracking to the last '*': O(|pattern| * |text|) at worst,
    // no recursion, so hostile patterns cannot blow the stack.
    size_t p = 0, t = 0;
    size_t star = std::string_view::npos, star_t = 0;
    while (t < text.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
            ++p;
            ++t;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            star_t = t;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            t = ++star_t;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*')
        ++p;
    return p == pattern.size();
}

bool placement_rule::matches(std::string_view queue) const { return glob_match(pattern, queue); }

std::string placement_rule::to_string() const {
    return pattern + " -> " + (target == target_kind::node ? "node:" : "group:") + target_name;
}

result<placement_rule, std::string> parse_placement_rule(std::string_view text) {
    auto body = trim(text);
    if (body.empty())
        return fail(std::string("empty rule: ") + std::string(expected_form));
    auto arrow = body.find("->");
    if (arrow == std::string_view::npos)
        return rule_error(text, "no '->'; " + std::string(expected_form));
    if (body.find("->", arrow + 2) != std::string_view::npos)
        return rule_error(text, "more than one '->'; " + std::string(expected_form));

    auto pattern = trim(body.substr(0, arrow));
    auto target = trim(body.substr(arrow + 2));
    if (pattern.empty())
        return rule_error(text, "the address pattern before '->' is empty");
    if (has_space(pattern))
        return rule_error(text, "the address pattern " + quoted(pattern) + " contains a space");
    if (target.empty())
        return rule_error(text, "the target after '->' is empty; expected node:<id> or group:<name>");

    auto colon = target.find(':');
    if (colon == std::string_view::npos)
        return rule_error(text, "the target " + quoted(target) +
                                    " has no kind; expected node:<id> or group:<name>");
    auto kind = trim(target.substr(0, colon));
    auto name = trim(target.substr(colon + 1));

    placement_rule rule;
    if (kind == "node")
        rule.target = placement_rule::target_kind::node;
    else if (kind == "group")
        rule.target = placement_rule::target_kind::group;
    else
        return rule_error(text, "unknown target kind " + quoted(kind) +
                                    "; expected node:<id> or group:<name>");
    if (name.empty())
        return rule_error(text, "the " + std::string(kind) + " name after '" + std::string(kind) +
                                    ":' is empty");
    if (has_space(name))
        return rule_error(text, "the " + std::string(kind) + " name " + quoted(name) +
                                    " contains a space");
    // The target goes into records of the metadata store, as a route's does.
    if (auto why = rule.target == placement_rule::target_kind::node ? check_node_id(name) : check_group_name(name))
        return rule_error(text, *why);
    rule.pattern = std::string(pattern);
    rule.target_name = std::string(name);
    return rule;
}

result<std::vector<placement_rule>, std::string>
parse_placement_rules(const std::vector<std::string>& texts) {
    std::vector<placement_rule> rules;
    rules.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
        auto r = parse_placement_rule(texts[i]);
        if (!r)
            return fail("entry " + std::to_string(i + 1) + ": " + r.error());
        rules.push_back(std::move(r).value());
    }
    return rules;
}

const placement_rule* first_matching_rule(const std::vector<placement_rule>& rules,
                                          std::string_view queue) {
    for (const auto& r : rules)
        if (r.matches(queue))
            return &r;
    return nullptr;
}

} // namespace wharf::wlm
