#pragma once
// placement_rule: a constraint that pins queue names matching an address
// pattern to one node or to one named group of nodes. Rules are kept in
// order; the FIRST rule whose pattern matches a queue name applies and the
// rest are ignored (so put specific patterns before general ones). A rule
// takes precedence over the placement policy: a node rule decides alone, a
// group rule limits the policy to the group's active nodes.
//
// Patterns are globs: '*' matches any run of characters, including none and
// including dots ("orders.*" matches "orders.eu.1"); '?' matches exactly one
// character; every other character matches itself (case-sensitive, no
// escapes).
//
// Pure values and functions; any thread.

#include "broker/common/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace wharf::wlm {

struct placement_rule {
    enum class target_kind { node, group };

    std::string pattern;
    target_kind target = target_kind::node;
    std::string target_name; // a node id or a group name

    bool matches(std::string_view queue) const;

    // The config form: "orders.* -> node:n2".
    std::string to_string() const;
};

// Glob match of the whole text (see above).
bool glob_match(std::string_view pattern, std::string_view text);

// Parses "<pattern> -> node:<id>" or "<pattern> -> group:<name>" (spaces
// around the parts are optional). The error says what is wrong and quotes
// the text.
result<placement_rule, std::string> parse_placement_rule(std::string_view text);

// Parses a list in order; the first error is returned, prefixed with
// "entry N: " (1-based).
result<std::vector<placement_rule>, std::string>
parse_placement_rules(const std::vector<std::string>& texts);

// The first rule that matches queue, or nullptr.
const placement_rule* first_matching_rule(const std::vector<placement_rule>& rules,
                                          std::string_view queue);

} // namespace wharf::wlm
