#pragma once
// Internal to broker/amqp: a parsed selector's tree (selector_parse.cpp
// builds it, selector.cpp evaluates it).

#include "broker/amqp/selector.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace wharf::amqp {

// A value in a selector: NULL (also "unknown" for a condition), a boolean,
// an exact or an approximate number, a string. A string is a view: of the
// message's bytes, of a literal the tree holds (node::text), or of a
// constant; none outlives one evaluation, so reading a message copies no
// string.
using sel_value = std::variant<std::monostate, bool, int64_t, double, std::string_view>;

// A LIKE pattern, compiled: the parts between its unescaped %s (so one
// more than it has %s), each a run of code points, like_any standing for _.
inline constexpr uint32_t like_any = 0xFFFFFFFF;
struct like_pattern {
    std::vector<std::vector<uint32_t>> parts;
};
// `s` as code points (a byte that does not start valid UTF-8 counts as one).
std::vector<uint32_t> code_points(std::string_view s);
// The pattern in `text` with `escape` (-1: none).
like_pattern compile_like(std::string_view text, int escape);
bool like_matches(const std::vector<uint32_t>& value, const like_pattern& p);

// Where an identifier's value comes from: an application property of its
// name, or one of the JMS names below, read from the AMQP sections as Qpid
// JMS writes them (AmqpJmsMessageFacade) and ActiveMQ Artemis reads them.
enum class message_field : uint8_t {
    property,
    priority, delivery_mode, timestamp, message_id, correlation_id, type,
    user_id, group_id, group_seq, delivery_count, expiration,
};
struct jms_name {
    std::string_view name;
    message_field field;
};
inline constexpr jms_name jms_names[] = {
    {"JMSPriority", message_field::priority},             // header.priority (4 when absent)
    {"JMSDeliveryMode", message_field::delivery_mode},    // header.durable: 'PERSISTENT' / 'NON_PERSISTENT'
    {"JMSTimestamp", message_field::timestamp},           // properties.creation-time
    {"JMSMessageID", message_field::message_id},          // properties.message-id, a string
    {"JMSCorrelationID", message_field::correlation_id},  // properties.correlation-id, a string
    {"JMSType", message_field::type},                     // properties.subject
    {"JMSXUserID", message_field::user_id},               // properties.user-id, its bytes as a string
    {"JMSXGroupID", message_field::group_id},             // properties.group-id
    {"JMSXGroupSeq", message_field::group_seq},           // properties.group-sequence
    {"JMSXDeliveryCount", message_field::delivery_count}, // deliveries so far, this one included
    {"JMSExpiration", message_field::expiration},         // when the queue expires it (ms), 0: never
};

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
    sel_value value;             // literal (a string literal: a view of `text`)
    std::string text;            // a string literal's characters
    std::string name;            // identifier
    message_field field = message_field::property; // identifier
    uint32_t slot = 0;           // a property identifier: its name's place in selector::names_
    std::vector<std::unique_ptr<node>> kids;
    std::vector<std::string> set; // IN
    like_pattern like;            // LIKE
    int height = 1;               // of the tree below: evaluating it recurses this deep
};

// How deep a tree may be: evaluating (and freeing) it recurses once a
// level, on the engine's thread. A chain `a OR b OR ...` is as deep as it
// is long.
inline constexpr int max_selector_height = 1000;
// The most characters between two %s of a LIKE pattern (what is searched
// for anywhere in the value; the parts at either end are matched in place).
inline constexpr size_t max_like_part = 64;

// Parses `text` into a tree, or says why not.
result<std::unique_ptr<selector::node>, std::string> parse_selector(std::string_view text);

} // namespace wharf::amqp
