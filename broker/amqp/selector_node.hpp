#pragma once
// Internal to broker/amqp: a parsed selector's tree (selector_parse.cpp
// builds it, selector.cpp evaluates it).

#include "broker/amqp/selector.hpp"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace wharf::amqp {

// A value in a selector: NULL (also "unknown" for a condition), a boolean,
// an exact or an approximate number, a string.
using sel_value = std::variant<std::monostate, bool, int64_t, double, std::string>;

struct selector::node {
    enum class op {
        literal, identifier,
        or_, and_, not_,
        eq, ne, lt, gt, le, ge,
        add, sub, mul, div, neg,
        between, in, like, is_null,
    };
    op o = op::literal;
    bool negated = false;        // NOT BETWEEN, NOT IN, NOT LIKE, IS NOT NULL
    sel_value value;             // literal
    std::string name;            // identifier
    std::vector<std::unique_ptr<node>> kids;
    std::vector<std::string> set; // IN
    std::string pattern;          // LIKE
    int escape = -1;              // LIKE ... ESCAPE 'c' (-1: none)
};

// Parses `text` into a tree, or says why not.
result<std::unique_ptr<selector::node>, std::string> parse_selector(std::string_view text);

} // namespace wharf::amqp
