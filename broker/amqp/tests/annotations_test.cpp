// Combining a modified outcome's message-annotations with a message's
// (AMQP 1.0 §3.4.5): what Proton decodes from the result, and the bytes
// that must not change.

#include "broker/amqp/annotations.hpp"
#include "amqp_builder.hpp"

#include <proton/codec.h>

#include <map>

namespace wharf::amqp::test {
namespace {

// The message's annotations as Proton decodes them: key (a symbol's name,
// or "#N" for ulong N) to the value's text.
std::map<std::string, std::string> annotations_of(std::string_view message) {
    auto m = make_pn_message();
    EXPECT_EQ(pn_message_decode(m.get(), message.data(), message.size()), 0) << "Proton cannot decode the result";
    std::map<std::string, std::string> out;
    pn_data_t* d = pn_message_annotations(m.get());
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP) return out;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        std::string key;
        if (pn_data_type(d) == PN_SYMBOL) {
            const pn_bytes_t b = pn_data_get_symbol(d);
            key.assign(b.start, b.size);
        } else {
            key = "#" + std::to_string(pn_data_get_ulong(d));
        }
        EXPECT_TRUE(pn_data_next(d));
        std::string value;
        if (pn_data_type(d) == PN_STRING) {
            const pn_bytes_t b = pn_data_get_string(d);
            value.assign(b.start, b.size);
        } else if (pn_data_type(d) == PN_INT) {
            value = std::to_string(pn_data_get_int(d));
        } else {
            value = "?";
        }
        out[key] = value;
    }
    return out;
}

std::string merged(std::string_view message, std::string_view map) {
    auto info = scan_message(message);
    EXPECT_TRUE(info) << info.error().description;
    EXPECT_FALSE(check_annotations(map).has_value());
    std::string out = with_annotations(message, *info, map);
    auto again = scan_message(out);
    EXPECT_TRUE(again) << "the result does not scan: " << again.error().description;
    return out;
}

const std::string body = section(amqp_value, str8("payload"));
const std::string props = section(properties, list8({bytes({0x40}), bytes({0x40}), str8("q")}));

TEST(annotations_merge, a_message_without_annotations_gets_them_after_its_header) {
    const std::string head = section(header, list8({bytes({0x41})}));
    const std::string delivery = section(delivery_annotations, map8({sym8("x-d"), str8("kept")}));
    const std::string msg = head + delivery + props + body;
    const std::string out = merged(msg, map8({sym8("x-reason"), str8("retry later")}));
    EXPECT_EQ(out, head + delivery + section(message_annotations, map8({sym8("x-reason"), str8("retry later")})) +
                       props + body);
    EXPECT_EQ(annotations_of(out), (std::map<std::string, std::string>{{"x-reason", "retry later"}}));
}

TEST(annotations_merge, a_key_the_message_has_is_replaced_in_place_and_new_keys_follow) {
    const std::string msg = section(message_annotations, map8({sym8("a"), str8("1"), sym8("b"), str8("2")})) + body;
    // sym32 "b" is the same key as the message's sym8 "b".
    const std::string out = merged(msg, map8({sym32("b"), str8("two"), sym8("c"), str8("3")}));
    EXPECT_EQ(out, section(message_annotations,
                           map8({sym8("a"), str8("1"), sym8("b"), str8("two"), sym8("c"), str8("3")})) + body);
}

TEST(annotations_merge, ulong_keys_match_whichever_way_they_were_encoded) {
    const std::string msg = section(message_annotations, map8({bytes({0x53, 7}), str8("old"), bytes({0x44}), str8("zero")})) + body;
    const std::string out = merged(msg, map8({bytes({0x80}) + be64(7), str8("new"), bytes({0x53, 0}), str8("z")}));
    EXPECT_EQ(annotations_of(out), (std::map<std::string, std::string>{{"#7", "new"}, {"#0", "z"}}));
}

TEST(annotations_merge, a_null_or_empty_map_changes_nothing_but_the_sections_shape) {
    const std::string msg = section(message_annotations, map8({sym8("a"), str8("1")})) + body;
    EXPECT_EQ(merged(msg, bytes({0x40})), msg);
    EXPECT_EQ(merged(msg, map8({})), msg);
    const std::string null_section = section(message_annotations, bytes({0x40})) + body;
    EXPECT_EQ(annotations_of(merged(null_section, map8({sym8("k"), str8("v")}))),
              (std::map<std::string, std::string>{{"k", "v"}}));
}

TEST(annotations_merge, a_message_of_header_only_gets_them_at_its_end) {
    const std::string head = section(header, list8({bytes({0x41})}));
    EXPECT_EQ(merged(head, map8({sym8("k"), str8("v")})), head + section(message_annotations, map8({sym8("k"), str8("v")})));
}

TEST(annotations_merge, a_large_map_is_written_as_a_map32_that_proton_reads) {
    const std::string big(300, 'v');
    const std::string out = merged(props + body, map8({sym8("k"), str8("v")}) /* small */);
    const std::string large = merged(out, map32({sym8("big"), str32(big)}));
    auto seen = annotations_of(large);
    EXPECT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen["big"], big);
    EXPECT_EQ(seen["k"], "v");
}

TEST(annotations_merge, proton_encoded_annotations_merge_into_a_proton_message) {
    auto m = make_pn_message();
    pn_data_t* ma = pn_message_annotations(m.get());
    pn_data_put_map(ma);
    pn_data_enter(ma);
    pn_data_put_symbol(ma, pn_str("x-opt-kept"));
    pn_data_put_int(ma, 1);
    pn_data_put_symbol(ma, pn_str("x-opt-count"));
    pn_data_put_int(ma, 1);
    pn_data_exit(ma);
    pn_data_put_string(pn_message_body(m.get()), pn_str("hello"));
    const std::string msg = pn_encode(m.get());

    pn_data_t* change = pn_data(0);
    pn_data_put_map(change);
    pn_data_enter(change);
    pn_data_put_symbol(change, pn_str("x-opt-count"));
    pn_data_put_int(change, 2);
    pn_data_exit(change);
    std::string encoded(64, '\0');
    const ssize_t n = pn_data_encode(change, encoded.data(), encoded.size());
    ASSERT_GT(n, 0);
    encoded.resize(static_cast<size_t>(n));
    pn_data_free(change);

    const std::string out = merged(msg, encoded);
    EXPECT_EQ(annotations_of(out), (std::map<std::string, std::string>{{"x-opt-kept", "1"}, {"x-opt-count", "2"}}));
    auto back = make_pn_message();
    ASSERT_EQ(pn_message_decode(back.get(), out.data(), out.size()), 0);
    pn_data_t* b = pn_message_body(back.get());
    pn_data_rewind(b);
    ASSERT_TRUE(pn_data_next(b));
    EXPECT_EQ(std::string(pn_data_get_string(b).start, pn_data_get_string(b).size), "hello");
}

TEST(annotations_check, keys_must_be_symbols_or_ulongs) {
    auto bad = check_annotations(map8({str8("x-reason"), str8("v")}));
    ASSERT_TRUE(bad.has_value());
    EXPECT_NE(bad->description.find("str8"), std::string::npos) << bad->description;
    EXPECT_NE(bad->description.find("symbols or ulongs"), std::string::npos) << bad->description;
    EXPECT_TRUE(check_annotations(map8({bytes({0x53, 1}), bytes({0x40})})) == std::nullopt);
}

TEST(annotations_check, what_is_not_a_whole_map_is_refused_with_the_reason) {
    EXPECT_NE(check_annotations(list8({sym8("a"), str8("b")}))->description.find("not a map"), std::string::npos);
    EXPECT_TRUE(check_annotations(map8({sym8("a"), str8("b")}).substr(0, 5)).has_value());    // cut short
    EXPECT_TRUE(check_annotations(map8({sym8("a"), str8("b")}) + bytes({0x40})).has_value()); // trailing bytes
    EXPECT_TRUE(check_annotations(bytes({0xc1, 3, 1, 0xa3, 0})).has_value());                  // odd count
    EXPECT_TRUE(check_annotations("").has_value());
}

} // namespace
} // namespace wharf::amqp::test
