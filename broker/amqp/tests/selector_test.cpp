// JMS selectors: what they select, read from messages Proton encodes, and
// what they refuse to parse.

#include "broker/amqp/selector.hpp"
#include "amqp_builder.hpp"

#include <proton/codec.h>

namespace wharf::amqp::test {
namespace {

// A message with application-properties colour = 'red', weight = 2.5,
// count = 7 (int), big = 9000000000 (long), flag = true, bin = binary; a
// durable header with priority 7; message-id 'id-1', creation-time 1000.
std::string sample() {
    auto m = make_pn_message();
    pn_message_set_durable(m.get(), true);
    pn_message_set_priority(m.get(), 7);
    pn_data_put_string(pn_message_id(m.get()), pn_str("id-1"));
    pn_message_set_creation_time(m.get(), 1000);
    pn_data_t* p = pn_message_properties(m.get());
    pn_data_put_map(p);
    pn_data_enter(p);
    pn_data_put_string(p, pn_str("colour"));
    pn_data_put_string(p, pn_str("red"));
    pn_data_put_string(p, pn_str("weight"));
    pn_data_put_double(p, 2.5);
    pn_data_put_string(p, pn_str("count"));
    pn_data_put_int(p, 7);
    pn_data_put_string(p, pn_str("big"));
    pn_data_put_long(p, 9000000000LL);
    pn_data_put_string(p, pn_str("flag"));
    pn_data_put_bool(p, true);
    pn_data_put_string(p, pn_str("bin"));
    pn_data_put_binary(p, pn_str("xyz"));
    pn_data_exit(p);
    pn_data_put_string(pn_message_body(m.get()), pn_str("body"));
    return pn_encode(m.get());
}

// A message whose application-properties are these strings.
std::string with_strings(const std::vector<std::pair<std::string, std::string>>& props) {
    auto m = make_pn_message();
    pn_data_t* p = pn_message_properties(m.get());
    pn_data_put_map(p);
    pn_data_enter(p);
    for (const auto& [k, v] : props) {
        pn_data_put_string(p, pn_str(k));
        pn_data_put_string(p, pn_str(v));
    }
    pn_data_exit(p);
    return pn_encode(m.get());
}

bool selects(const std::string& text, const std::string& message = sample()) {
    auto s = selector::parse(text);
    EXPECT_TRUE(s.has_value()) << text << ": " << s.error();
    if (!s) return false;
    return s.value() == nullptr || s.value()->matches(message);
}

TEST(selector, comparisons_of_properties_and_literals) {
    EXPECT_TRUE(selects("colour = 'red'"));
    EXPECT_FALSE(selects("colour = 'blue'"));
    EXPECT_TRUE(selects("colour <> 'blue'"));
    EXPECT_TRUE(selects("count = 7 AND count > 6 AND count >= 7 AND count < 8 AND count <= 7"));
    EXPECT_TRUE(selects("weight > 2 AND weight < 3.0"));
    EXPECT_TRUE(selects("count = 7.0")) << "integers and reals compare as numbers";
    EXPECT_TRUE(selects("big > 8000000000"));
    EXPECT_TRUE(selects("flag = TRUE AND flag"));
    EXPECT_TRUE(selects("count + 1 = 8 AND count * 2 = 14 AND -count = -7 AND weight * 2 = 5"));
}

// A division is of reals, as ActiveMQ and Artemis evaluate it (their
// SelectorTest has 123 / 2 = 61.5), and by zero it gives what Java's does.
TEST(selector, division_is_of_reals_as_in_activemq) {
    EXPECT_TRUE(selects("count / 2 = 3.5"));
    EXPECT_FALSE(selects("count / 2 = 3"));
    EXPECT_TRUE(selects("count / 0 > 1000000 AND -count / 0 < -1000000")) << "infinities";
    // NaN compares as Java's operators compare it (Artemis's compareTo
    // would make it equal to itself and greater than every number).
    EXPECT_FALSE(selects("0 / 0 = 0") || selects("0 / 0 < 1") || selects("0 / 0 >= 1")) << "NaN: not equal, not ordered";
    EXPECT_TRUE(selects("0 / 0 <> 0"));
}

TEST(selector, null_is_unknown_and_only_true_selects) {
    EXPECT_FALSE(selects("missing = 'x'"));
    EXPECT_FALSE(selects("NOT (missing = 'x')")) << "NOT unknown is unknown";
    EXPECT_TRUE(selects("missing IS NULL AND colour IS NOT NULL"));
    EXPECT_TRUE(selects("missing = 'x' OR colour = 'red'"));
    EXPECT_FALSE(selects("missing = 'x' AND colour = 'red'"));
    EXPECT_FALSE(selects("missing + 1 > 0"));
    EXPECT_TRUE(selects("bin IS NULL")) << "a binary property is not comparable: NULL";
}

TEST(selector, unlike_types_compare_false_and_strings_only_by_equality) {
    EXPECT_FALSE(selects("colour = 7"));
    EXPECT_TRUE(selects("NOT (colour = 7)"));
    EXPECT_FALSE(selects("colour > 'a'"));
    EXPECT_FALSE(selects("flag = 1"));
}

TEST(selector, between_in_and_like) {
    EXPECT_TRUE(selects("count BETWEEN 5 AND 10"));
    EXPECT_FALSE(selects("count NOT BETWEEN 5 AND 10"));
    EXPECT_TRUE(selects("count NOT BETWEEN 8 AND 10") && selects("count NOT BETWEEN 1 AND 6"));
    // NOT BETWEEN is x < a OR x > b (JMS 2.0 §3.8.1.2): false for a value of
    // another type and for NaN, as BETWEEN is, not its negation.
    EXPECT_FALSE(selects("colour NOT BETWEEN 1 AND 2")) << "a string";
    EXPECT_FALSE(selects("flag NOT BETWEEN 1 AND 2")) << "a boolean";
    EXPECT_FALSE(selects("0 / 0 NOT BETWEEN 1 AND 2") || selects("0 / 0 BETWEEN 1 AND 2")) << "NaN";
    EXPECT_FALSE(selects("missing NOT BETWEEN 1 AND 2") || selects("NOT (missing NOT BETWEEN 1 AND 2)"));
    EXPECT_TRUE(selects("weight BETWEEN 2.5 AND 2.5"));
    EXPECT_TRUE(selects("colour IN ('green', 'red')"));
    EXPECT_FALSE(selects("colour NOT IN ('green', 'red')"));
    EXPECT_FALSE(selects("missing IN ('a')") || selects("missing NOT IN ('a')"));
    // A value that is not a string is unknown to IN, as in ActiveMQ: no
    // form of it selects.
    EXPECT_FALSE(selects("count IN ('7')") || selects("count NOT IN ('7')") || selects("NOT (count IN ('7'))"));
    EXPECT_TRUE(selects("colour LIKE 'r%'"));
    EXPECT_TRUE(selects("colour LIKE '_e_'"));
    EXPECT_FALSE(selects("colour LIKE 're'"));
    EXPECT_TRUE(selects("colour NOT LIKE 'b%'"));
}

TEST(selector, like_escapes_and_counts_characters_not_bytes) {
    const std::string msg = with_strings({{"code", "50%_off"}, {"word", "caf\xc3\xa9"}});
    EXPECT_TRUE(selects("code LIKE '50!%!_off' ESCAPE '!'", msg));
    EXPECT_FALSE(selects("code LIKE '50!%!_of' ESCAPE '!'", msg));
    EXPECT_TRUE(selects("word LIKE 'caf_'", msg)) << "_ is one character, two bytes here";
    EXPECT_TRUE(selects("word LIKE '%f%'", msg));
}

// The escape character escapes only _, % and itself (ActiveMQ's
// LikeExpression); before any other character it keeps its own meaning.
// The cases of Artemis's SelectorTest.testSpecialEscapeLiteral.
TEST(selector, an_escape_before_an_ordinary_character_is_itself) {
    const std::string msg = with_strings({{"e", "XD7xlJIQn_"}, {"t", "a!b"}});
    EXPECT_TRUE(selects("e LIKE '_D7xlJIQn__' ESCAPE '_'", msg));
    EXPECT_TRUE(selects("e LIKE '%D7xlJIQn%_' ESCAPE '%'", msg));
    EXPECT_TRUE(selects("e LIKE '%D7xlJIQn%' ESCAPE '%'", msg));
    EXPECT_TRUE(selects("e LIKE '%D7xlJIQn!_' ESCAPE '!'", msg));
    EXPECT_FALSE(selects("e LIKE '%D7xlJIQ!_' ESCAPE '!'", msg));
    EXPECT_TRUE(selects("t LIKE 'a!b' ESCAPE '!'", msg)) << "! before b is a plain !";
    EXPECT_TRUE(selects("t LIKE 'a!!b' ESCAPE '!'", msg)) << "!! is one !";
}

TEST(selector, jms_header_names_read_the_amqp_sections) {
    EXPECT_TRUE(selects("JMSPriority = 7 AND JMSDeliveryMode = 'PERSISTENT'"));
    EXPECT_TRUE(selects("JMSMessageID = 'id-1' AND JMSTimestamp = 1000"));
    EXPECT_TRUE(selects("JMSCorrelationID IS NULL"));
    auto plain = make_pn_message();
    pn_data_put_string(pn_message_body(plain.get()), pn_str("x"));
    const std::string msg = pn_encode(plain.get());
    EXPECT_TRUE(selects("JMSPriority = 4 AND JMSDeliveryMode = 'NON_PERSISTENT'", msg)) << "the header's defaults";
    EXPECT_TRUE(selects("JMSType IS NULL AND JMSXUserID IS NULL AND JMSXGroupID IS NULL AND JMSXGroupSeq IS NULL",
                        msg));
}

// Where Qpid JMS puts them: JMSType in subject, JMSXUserID's UTF-8 in
// user-id (binary), the group in group-id and group-sequence; the delivery
// count is the queue's, not the bytes'.
TEST(selector, jms_type_and_jmsx_names_read_the_properties_and_the_queues_count) {
    auto m = make_pn_message();
    pn_message_set_subject(m.get(), "order");
    pn_message_set_user_id(m.get(), pn_str("ann\xc3\xa9"));
    pn_message_set_group_id(m.get(), "g-7");
    pn_message_set_group_sequence(m.get(), 3);
    // The queue seeds its count from the header as sent and keeps it since:
    // the count matches() is given is what counts, not the bytes' 5.
    pn_message_set_delivery_count(m.get(), 5);
    pn_data_put_string(pn_message_body(m.get()), pn_str("x"));
    const std::string msg = pn_encode(m.get());
    EXPECT_TRUE(selects("JMSType = 'order' AND JMSXUserID = 'ann\xc3\xa9'", msg));
    EXPECT_TRUE(selects("JMSXGroupID = 'g-7' AND JMSXGroupSeq BETWEEN 3 AND 3", msg));
    auto s = selector::parse("JMSXDeliveryCount > 1");
    ASSERT_TRUE(s.has_value()) << s.error();
    EXPECT_FALSE(s.value()->matches(msg, {.delivery_count = 0})) << "a first delivery counts 1";
    EXPECT_TRUE(s.value()->matches(msg, {.delivery_count = 1}));
    // JMSExpiration is the queue's expiry time, not read from the bytes.
    auto never = selector::parse("JMSExpiration = 0");
    ASSERT_TRUE(never.has_value()) << never.error();
    EXPECT_TRUE(never.value()->matches(msg, {}));
    EXPECT_FALSE(never.value()->matches(msg, {.expiry_ms = 1'700'000'000'000}));
    auto later = selector::parse("JMSExpiration > 1700000000000");
    ASSERT_TRUE(later.has_value()) << later.error();
    EXPECT_TRUE(later.value()->matches(msg, {.expiry_ms = 1'700'000'000'001}));
    EXPECT_FALSE(later.value()->matches(msg, {.expiry_ms = 1'700'000'000'000}));
}

TEST(selector, keywords_are_case_insensitive_and_precedence_is_sqls) {
    EXPECT_TRUE(selects("colour = 'red' or colour = 'blue' and count = 0"));
    EXPECT_FALSE(selects("(colour = 'red' or colour = 'blue') and count = 0"));
    EXPECT_TRUE(selects("not colour = 'blue'"));
    EXPECT_TRUE(selects("count - 2 * 3 = 1"));
    EXPECT_TRUE(selects("  ")) << "a blank selector selects everything";
}

// Java's integer literals, as ActiveMQ's selector parser reads them: 017
// is octal, 0x1F hex (a positive long), L ends any of them; and the one
// literal that only fits negated, Long.MIN_VALUE.
TEST(selector, integer_literals_are_javas) {
    EXPECT_TRUE(selects("count = 07 AND count = 0x7 AND count = 0X07L AND count = 7L"));
    EXPECT_TRUE(selects("count + 8 = 017"));
    EXPECT_TRUE(selects("0x7FFFFFFFFFFFFFFF = 9223372036854775807 AND 0x7fffffffffffffffL > 0"));
    EXPECT_TRUE(selects("-9223372036854775808 < -9223372036854775807 AND -9223372036854775808 + 1 < 0"));
    EXPECT_TRUE(selects("big > -9223372036854775808"));
    EXPECT_TRUE(selects("weight = 2.5 AND 0.5 * 5 = weight AND 00.5 = .5"));
    for (const char* bad : {"count = 08", "count = 0x", "count = 0xG1", "count = 9223372036854775808",
                            "count = 0777777777777777777777777", "count = 0x8000000000000000",
                            "count = 0xFFFFFFFFFFFFFFFF"}) {
        auto s = selector::parse(bad);
        EXPECT_FALSE(s.has_value()) << bad;
    }
}

TEST(selector, what_does_not_parse_is_refused_with_where) {
    for (const char* bad : {"colour =", "colour = 'red", "colour == 'red'", "(colour = 'red'", "colour IN (1, 2)",
                            "colour LIKE 5", "5 LIKE 'a'", "colour IS 'x'", "colour = 'a' AND", "a # b",
                            "colour LIKE 'a' ESCAPE 'ab'", "99999999999999999999 = 1", "count NOT = 1"}) {
        auto s = selector::parse(bad);
        ASSERT_FALSE(s.has_value()) << bad;
        EXPECT_NE(s.error().find("offset"), std::string::npos) << bad << ": " << s.error();
    }
    EXPECT_FALSE(selector::parse(std::string(100000, '(') + "a").has_value()) << "nesting is bounded";
    EXPECT_FALSE(selector::parse(std::string(100000, '-') + "1 = 1").has_value()) << "nesting is bounded";
}

// A chain is as deep as it is long (evaluating it recurses once a link):
// a long one is refused, not left to overflow the engine's stack.
TEST(selector, a_chain_too_long_to_evaluate_safely_is_refused) {
    std::string sum = "a", ors = "a = 0";
    for (int i = 0; i < 32000; ++i) sum += "+a";
    for (int i = 0; i < 20000; ++i) ors += " OR a = " + std::to_string(i);
    for (const std::string& text : {sum + " = 1", ors}) {
        auto s = selector::parse(text);
        ASSERT_FALSE(s.has_value());
        EXPECT_NE(s.error().find("too deep"), std::string::npos) << s.error();
    }
    std::string some = "count = 0";
    for (int i = 1; i < 500; ++i) some += " OR count = " + std::to_string(i);
    EXPECT_TRUE(selects(some)) << "a chain of 500 is fine";
}

TEST(selector, like_takes_each_part_where_it_first_occurs) {
    const std::string msg = with_strings({{"s", "xabyabz"}, {"long", std::string(100000, 'a')}});
    EXPECT_TRUE(selects("s LIKE '%ab%ab%'", msg));
    EXPECT_TRUE(selects("s LIKE 'x%ab_ab%z'", msg));
    EXPECT_FALSE(selects("s LIKE '%ab%ab%ab%'", msg));
    EXPECT_TRUE(selects("s LIKE '%%'", msg));
    EXPECT_FALSE(selects("s LIKE 'xab'", msg));
    EXPECT_TRUE(selects("s LIKE '_______'", msg));
    // One pass over the value, however the pattern is made: this would
    // take minutes with backtracking.
    const std::string part(60, 'a');
    EXPECT_FALSE(selects("long LIKE '%" + part + "b%" + part + "b%'", msg));
    auto too_long = selector::parse("s LIKE '%" + std::string(65, 'a') + "%'");
    ASSERT_FALSE(too_long.has_value());
    EXPECT_NE(too_long.error().find("at most 64"), std::string::npos) << too_long.error();
}

// JMS header names a selector may not name are refused; JMSX and vendor
// JMS_ names (JMS 2.0 §3.8.1.1) are properties, NULL when absent.
TEST(selector, other_jms_header_names_are_refused_and_jmsx_names_are_properties) {
    for (const char* name : {"JMSRedelivered", "JMSDestination", "JMSFoo"}) {
        auto s = selector::parse(std::string(name) + " = 'x'");
        ASSERT_FALSE(s.has_value()) << name;
        EXPECT_NE(s.error().find(name), std::string::npos) << s.error();
    }
    const std::string msg = with_strings({{"JMSXAppID", "billing"}, {"JMS_AMQP_X", "y"}});
    EXPECT_TRUE(selects("JMSXAppID = 'billing' AND JMS_AMQP_X = 'y' AND JMSXProducerTXID IS NULL", msg));
    EXPECT_TRUE(selects("JMSXAppID IS NULL AND JMS_Vendor IS NULL"));
}

// A selector reads the properties in one walk for all its names, as far as
// each name needs (docs/benchmarks.md, "A selector's properties, read
// once"); what it reads must be each name's own value, however many names,
// uses and properties there are.
TEST(selector, each_name_reads_its_own_property_however_many_names_and_uses) {
    std::vector<std::pair<std::string, std::string>> props;
    for (int i = 0; i < 20000; ++i) props.emplace_back("p" + std::to_string(i), "v" + std::to_string(i));
    const std::string msg = with_strings(props);
    std::string text = "z = 'x'";
    for (int i = 0; i < 900; ++i) text += " OR z = 'x'"; // within the 1,000 levels allowed
    EXPECT_TRUE(selects(text + " OR p19999 = 'v19999'", msg)) << "the last property, after 901 uses of an absent one";
    EXPECT_FALSE(selects(text + " OR p19999 = 'v19998'", msg));
    // Up to 8 names are compared in turn, more are searched for (and their
    // values kept on the heap): each at the boundary reads its own value.
    for (const int names : {7, 8, 9, 40}) {
        SCOPED_TRACE(names);
        std::string all;
        for (int i = names - 1; i >= 0; --i) {
            const int k = i * 487 % 20000;
            all += (all.empty() ? "" : " AND ") + ("p" + std::to_string(k) + " = 'v" + std::to_string(k) + "'");
        }
        EXPECT_TRUE(selects(all + " AND q IS NULL", msg));
        EXPECT_FALSE(selects(all + " AND p1 <> 'v1'", msg));
        EXPECT_FALSE(selects("p487 = 'v0' OR (" + all + " AND p0 = 'v487')", msg)) << "two slots swapped";
    }
}

// Keys are strings or symbols alike; other keys are skipped; of a key that
// is there twice (which AMQP does not allow) the first counts, whichever
// name is read first.
TEST(selector, keys_are_strings_or_symbols_and_the_first_of_a_repeated_key_counts) {
    auto m = make_pn_message();
    pn_data_t* p = pn_message_properties(m.get());
    pn_data_put_map(p);
    pn_data_enter(p);
    pn_data_put_int(p, 5);                  // not a name
    pn_data_put_string(p, pn_str("five"));
    pn_data_put_symbol(p, pn_str("sym"));
    pn_data_put_string(p, pn_str("s"));
    pn_data_put_string(p, pn_str("a"));
    pn_data_put_string(p, pn_str("x"));
    pn_data_put_string(p, pn_str("b"));
    pn_data_put_string(p, pn_str("b1"));
    pn_data_put_string(p, pn_str("a"));
    pn_data_put_string(p, pn_str("y"));
    pn_data_exit(p);
    const std::string msg = pn_encode(m.get());
    EXPECT_TRUE(selects("sym = 's'", msg));
    EXPECT_TRUE(selects("a = 'x'", msg));
    EXPECT_FALSE(selects("a = 'y'", msg));
    EXPECT_TRUE(selects("b = 'b1' AND a = 'x'", msg)) << "a found on the way to b";
    EXPECT_TRUE(selects("zz IS NULL AND a = 'x'", msg)) << "a after a walk to the end";
}

// Names are read as the evaluation reaches them (an OR already true does
// not read the name after it): each still finds its value, in any order.
TEST(selector, names_read_in_any_order_find_their_values) {
    const std::string msg = with_strings({{"colour", "red"}, {"size", "L"}});
    EXPECT_TRUE(selects("colour = 'red' OR missing = 'x'", msg));
    EXPECT_TRUE(selects("(missing = 'x' OR colour = 'red') AND size = 'L'", msg));
}

TEST(selector, a_message_that_does_not_scan_is_not_selected) {
    auto s = selector::parse("colour IS NULL");
    ASSERT_TRUE(s.has_value());
    EXPECT_FALSE(s.value()->matches(std::string("\x00\x53", 2)));
    EXPECT_TRUE(s.value()->matches(section(amqp_value, str8("no properties"))));
}

} // namespace
} // namespace wharf::amqp::test
