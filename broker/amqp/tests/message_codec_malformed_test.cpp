// scan_message on untrusted bytes: truncations, garbage, mutations, wrong
// field types, out-of-order sections, bad constructors. Inputs are copied to
// exact-size heap blocks so that AddressSanitizer catches any overread.

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/tests/amqp_builder.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace wharf::amqp {
namespace {

using namespace wharf::amqp::test;

// Scans a copy of `b` in an exact-size block; checks that a failure is
// described with an offset.
result<message_info, codec_error> scan_exact(std::string_view b) {
    exact_buffer buf(b);
    auto r = scan_message(buf.view());
    if (!r.has_value()) {
        EXPECT_NE(r.error().description.find("offset"), std::string::npos) << r.error().description;
    }
    return r;
}

codec_error scan_error(std::string_view b) {
    auto r = scan_exact(b);
    EXPECT_FALSE(r.has_value()) << "expected an error";
    return r.has_value() ? codec_error{} : r.error();
}

void expect_error(std::string_view b, codec_errc code, std::string_view mentions = {}) {
    const codec_error e = scan_error(b);
    EXPECT_EQ(static_cast<int>(e.code), static_cast<int>(code)) << e.description;
    EXPECT_NE(e.description.find(mentions), std::string::npos) << e.description << " should mention " << mentions;
}

// A message with every section, hand-built; `boundaries` gets the offset at
// which each section ends.
std::string every_section_message(std::vector<size_t>& boundaries) {
    const std::vector<std::string> sections = {
        section(header, list8({bytes({0x41}), bytes({0x50, 6}), bytes({0x70}) + be32(70000)})),
        section(delivery_annotations, map8({sym8("x-opt-a"), array8(bytes({0x71}), 2, be32(1) + be32(2))})),
        symbol_section("amqp:message-annotations:map", map32({sym8("x-opt-b"), bytes({0x00, 0x53, 0x01, 0x45})})),
        section(properties, list8({str8("id"), bytes({0x40}), str8("addr"), bytes({0x40}), sym32("reply"),
                                   bytes({0x40}), bytes({0x40}), bytes({0x40}), bytes({0x83}) + be64(99)})),
        section(application_properties, map8({str8("k1"), str32("v1"), str8("k2"), bytes({0x98}) + std::string(16, 'u')})),
        section(amqp_sequence, list8({str8("a"), list32({bytes({0x44}), bytes({0x61, 0, 1})})})),
        ulong_section(amqp_sequence, bytes({0x45})),
        section(footer, map8({sym8("sig"), vbin32("xyz")})),
    };
    std::string b;
    for (const auto& s : sections) {
        b += s;
        boundaries.push_back(b.size());
    }
    return b;
}

TEST(message_codec_malformed, empty_message_is_truncated) {
    const codec_error e = scan_error("");
    EXPECT_EQ(e.code, codec_errc::truncated);
    EXPECT_NE(e.description.find("empty"), std::string::npos) << e.description;
}

TEST(message_codec_malformed, every_prefix_of_a_hand_built_message_fails_cleanly) {
    std::vector<size_t> boundaries;
    const std::string b = every_section_message(boundaries);
    ASSERT_TRUE(scan_exact(b).has_value());
    const std::set<size_t> ok_at(boundaries.begin(), boundaries.end());
    for (size_t n = 0; n <= b.size(); ++n) {
        auto r = scan_exact(std::string_view(b).substr(0, n));
        if (ok_at.count(n)) {
            EXPECT_TRUE(r.has_value()) << "prefix " << n << ": " << r.error().description;
        } else {
            ASSERT_FALSE(r.has_value()) << "prefix " << n << " of " << b.size() << " was accepted";
            EXPECT_EQ(r.error().code, codec_errc::truncated) << "prefix " << n << ": " << r.error().description;
        }
    }
}

TEST(message_codec_malformed, every_prefix_of_a_proton_message_fails_cleanly) {
    auto m = make_pn_message();
    pn_message_set_durable(m.get(), true);
    pn_message_set_ttl(m.get(), 1000);
    pn_message_set_address(m.get(), "a");
    pn_message_set_reply_to(m.get(), std::string(300, 'r').c_str());
    pn_message_set_expiry_time(m.get(), 5);
    for (pn_data_t* d : {pn_message_instructions(m.get()), pn_message_annotations(m.get()), pn_message_properties(m.get())}) {
        pn_data_put_map(d);
        pn_data_enter(d);
        pn_data_put_symbol(d, pn_str("key"));
        pn_data_put_array(d, false, PN_LONG);
        pn_data_enter(d);
        pn_data_put_long(d, 1);
        pn_data_put_long(d, 2);
        pn_data_exit(d);
        pn_data_exit(d);
    }
    pn_data_put_string(pn_message_body(m.get()), pn_str("body"));
    const std::string b = pn_encode(m.get());
    ASSERT_TRUE(scan_exact(b).has_value());
    int accepted = 0;
    for (size_t n = 0; n <= b.size(); ++n) {
        auto r = scan_exact(std::string_view(b).substr(0, n));
        if (r.has_value()) {
            ++accepted;
        } else {
            EXPECT_EQ(r.error().code, codec_errc::truncated) << "prefix " << n << ": " << r.error().description;
        }
    }
    EXPECT_EQ(accepted, 6); // one per section: a cut between sections is a shorter valid message
}

TEST(message_codec_malformed, random_bytes_fail_cleanly) {
    std::mt19937 rng(20240601);
    int accepted = 0;
    for (int i = 0; i < 200000; ++i) {
        std::string b(rng() % 48, '\0');
        for (auto& c : b) {
            c = static_cast<char>(rng());
        }
        if (i % 2 == 0 && b.size() >= 3) { // start like a section to get further in
            b[0] = 0x00;
            b[1] = 0x53;
            b[2] = static_cast<char>(0x70 + rng() % 9);
        }
        accepted += scan_exact(b).has_value();
    }
    EXPECT_LT(accepted, 200000);
}

TEST(message_codec_malformed, mutated_messages_fail_cleanly_or_agree_with_proton) {
    std::vector<size_t> boundaries;
    const std::string valid = every_section_message(boundaries);
    std::mt19937 rng(7);
    int accepted = 0;
    for (size_t pos = 0; pos < valid.size(); ++pos) {
        for (int v : {0x00, 0x01, 0x40, 0x45, 0x53, 0x7f, 0x80, 0xa1, 0xc0, 0xd1, 0xe0, 0xf0, 0xff, -1, -2}) {
            std::string b = valid;
            b[pos] = static_cast<char>(v >= 0 ? v : static_cast<int>(rng()));
            auto r = scan_exact(b);
            if (!r.has_value()) {
                continue;
            }
            ++accepted;
            // Whatever we accept, Proton must accept too, with the same header.
            auto m = make_pn_message();
            if (pn_message_decode(m.get(), b.data(), b.size()) == 0) {
                EXPECT_EQ(pn_message_is_durable(m.get()), r->header.durable) << "mutation at " << pos;
                EXPECT_EQ(pn_message_get_priority(m.get()), r->header.priority) << "mutation at " << pos;
                EXPECT_EQ(pn_message_get_delivery_count(m.get()), r->header.delivery_count) << "mutation at " << pos;
            }
        }
    }
    EXPECT_GT(accepted, 0);
}

TEST(message_codec_malformed, deep_nesting_is_refused_not_a_stack_overflow) {
    std::string v = bytes({0x45});
    for (int i = 0; i < 2000; ++i) {
        v = list32({v});
    }
    expect_error(section(amqp_value, v), codec_errc::bad_constructor, "nested");
    // A run of described-value markers nests descriptors.
    expect_error(section(amqp_value, std::string(100000, '\0')), codec_errc::bad_constructor, "nested");
    // Array element constructors can nest descriptors too.
    expect_error(section(amqp_value, bytes({0xf0}) + be32(100004) + be32(0) + std::string(100000, '\0')),
                 codec_errc::bad_constructor, "nested");
    // Arrays whose one element is an array, 20,000 deep (180 KB): this
    // overflowed the stack and killed the node.
    std::string body = be32(5) + be32(0) + bytes({0x40}); // array32 of no nulls, less its constructor
    for (int i = 0; i < 20000; ++i) body = be32(uint32_t(body.size() + 5)) + be32(1) + bytes({0xf0}) + body;
    expect_error(section(amqp_value, bytes({0xf0}) + body), codec_errc::bad_constructor, "nested");
}

TEST(message_codec_malformed, not_a_section) {
    expect_error(bytes({0x40}), codec_errc::bad_section, "offset 0");
    expect_error(str8("hello"), codec_errc::bad_section, "not a described message section");
    expect_error(section(header, bytes({0x45})) + bytes({0x41}), codec_errc::bad_section, "offset 4");
    expect_error(section(0x79, bytes({0x40})), codec_errc::bad_section, "121");
    expect_error(section(0x10, bytes({0x40})), codec_errc::bad_section, "16");
    expect_error(bytes({0x00, 0x80}) + be64(0x0000000100000070ull) + bytes({0x45}), codec_errc::bad_section);
    expect_error(bytes({0x00, 0x44, 0x45}), codec_errc::bad_section, "ulong0");
    expect_error(symbol_section("amqp:header:map", bytes({0x45})), codec_errc::bad_section, "amqp:header:map");
    expect_error(bytes({0x00}) + str8("amqp:header:list") + bytes({0x45}), codec_errc::bad_section, "str8");
    expect_error(section(data, str8("not binary")), codec_errc::bad_section, "data");
    expect_error(section(amqp_sequence, map8({})), codec_errc::bad_section, "amqp-sequence");
    expect_error(section(header, map8({})), codec_errc::bad_section, "header");
    expect_error(section(properties, str8("x")), codec_errc::bad_section, "properties");
    expect_error(section(message_annotations, list8({})), codec_errc::bad_section, "message-annotations");
    expect_error(section(footer, bytes({0x41})), codec_errc::bad_section, "footer");
}

TEST(message_codec_malformed, unknown_format_codes) {
    for (int code : {0x01, 0x0f, 0x46, 0x4f, 0x57, 0x5f, 0x62, 0x75, 0x85, 0x90, 0x99, 0xa2, 0xb2, 0xc2, 0xd2,
                     0xe1, 0xf1, 0xff}) {
        const std::string b = section(amqp_value, list8({bytes({0x40}), bytes({code, 0, 0, 0, 0, 0, 0, 0, 0})}));
        // The value sits at offset 3 + list8 header 3 + null 1 = 7.
        expect_error(b, codec_errc::bad_constructor, "offset 7");
    }
    expect_error(section(amqp_value, array8(bytes({0x46}), 1, "")), codec_errc::bad_constructor, "array element");
}

TEST(message_codec_malformed, inconsistent_sizes_and_counts) {
    // A map needs an even number of elements.
    expect_error(section(amqp_value, map8({str8("k")})), codec_errc::bad_constructor, "odd");
    // list8 with size 0 has no room for its count.
    expect_error(section(amqp_value, bytes({0xc0, 0x00})), codec_errc::bad_constructor, "too small");
    // Elements end before the declared size.
    expect_error(section(amqp_value, bytes({0xc0, 0x03, 0x01, 0x40, 0x40})), codec_errc::bad_constructor,
                 "elements end at offset 7");
    // An element runs past the declared size (though not past the message).
    expect_error(section(amqp_value, bytes({0xc0, 0x02, 0x01, 0x52, 0x07})) + section(footer, map8({})),
                 codec_errc::truncated, "enclosing value");
    // More elements than bytes.
    expect_error(section(amqp_value, bytes({0xd0}) + be32(5) + be32(0xffffffffu) + bytes({0x40})),
                 codec_errc::bad_constructor, "4294967295 elements");
    // Arrays: fixed-width elements must fill the size exactly.
    expect_error(section(amqp_value, array8(bytes({0x71}), 2, be32(1))), codec_errc::truncated, "array8");
    expect_error(section(amqp_value, array8(bytes({0x71}), 1, be32(1) + "x")), codec_errc::bad_constructor, "array8");
    expect_error(section(amqp_value, array32(bytes({0x80}), 0xffffffffu, be64(1))), codec_errc::truncated, "array32");
    expect_error(section(amqp_value, array8(bytes({0xa1}), 3, bytes({1, 'a'}))), codec_errc::bad_constructor);
    // The size field itself cut off by the end of the message.
    expect_error(section(amqp_value, bytes({0xb0, 0, 0})), codec_errc::truncated, "message ends inside vbin32");
    expect_error(section(amqp_value, bytes({0xb1}) + be32(0xffffffffu) + "abc"), codec_errc::truncated, "str32");
    // Header and properties lists are held to the same rules.
    expect_error(section(header, bytes({0xc0, 0x03, 0x01, 0x41, 0x41})), codec_errc::bad_constructor, "header list");
    expect_error(section(header, bytes({0xc0, 0x02, 0x02, 0x41})), codec_errc::bad_constructor, "elements");
    expect_error(section(header, bytes({0xc0, 0x02, 0x01, 0x56})) + section(amqp_value, bytes({0x40})),
                 codec_errc::truncated, "enclosing value ends inside a boolean");
    expect_error(section(properties, bytes({0xc0, 0x05, 0x03, 0x40, 0x40, 0xa1, 0x05})) + str8("abcd"),
                 codec_errc::truncated, "str8");
}

TEST(message_codec_malformed, wrong_header_field_types) {
    const auto with_field = [](size_t index, const std::string& value) {
        std::vector<std::string> fields(index, bytes({0x40}));
        fields.push_back(value);
        return section(header, list8(fields));
    };
    expect_error(with_field(0, str8("yes")), codec_errc::bad_field_type, "header.durable is str8");
    expect_error(with_field(0, bytes({0x50, 1})), codec_errc::bad_field_type, "durable");
    expect_error(with_field(0, bytes({0x56, 2})), codec_errc::bad_field_type, "invalid byte 0x02");
    expect_error(with_field(0, bytes({0x00, 0x53, 0x01, 0x41})), codec_errc::bad_field_type, "described");
    expect_error(with_field(1, bytes({0x52, 5})), codec_errc::bad_field_type, "header.priority is smalluint");
    expect_error(with_field(1, bytes({0x51, 5})), codec_errc::bad_field_type, "priority");
    expect_error(with_field(2, bytes({0x80}) + be64(1)), codec_errc::bad_field_type, "header.ttl is ulong");
    expect_error(with_field(2, bytes({0x71}) + be32(1)), codec_errc::bad_field_type, "ttl");
    expect_error(with_field(3, bytes({0x43})), codec_errc::bad_field_type, "first-acquirer");
    expect_error(with_field(4, bytes({0x54, 1})), codec_errc::bad_field_type, "delivery-count is smallint");
    expect_error(with_field(4, bytes({0x44})), codec_errc::bad_field_type, "delivery-count");
    // The offset points at the field: section 3 + list8 header 3 + four nulls.
    expect_error(with_field(4, bytes({0x41})), codec_errc::bad_field_type, "offset 10");
}

TEST(message_codec_malformed, wrong_properties_field_types) {
    const auto with_field = [](size_t index, const std::string& value) {
        std::vector<std::string> fields(index, bytes({0x40}));
        fields.push_back(value);
        return section(properties, list8(fields));
    };
    expect_error(with_field(2, vbin8("q")), codec_errc::bad_field_type, "properties.to is vbin8");
    expect_error(with_field(2, bytes({0x71}) + be32(1)), codec_errc::bad_field_type, "to");
    expect_error(with_field(2, bytes({0x00, 0xa3, 1, 'x', 0xa1, 1, 'q'})), codec_errc::bad_field_type, "to");
    expect_error(with_field(4, bytes({0x53, 1})), codec_errc::bad_field_type, "properties.reply-to");
    expect_error(with_field(4, vbin32("q")), codec_errc::bad_field_type, "reply-to");
    expect_error(with_field(8, bytes({0x80}) + be64(1)), codec_errc::bad_field_type, "absolute-expiry-time is ulong");
    expect_error(with_field(8, str8("tomorrow")), codec_errc::bad_field_type, "absolute-expiry-time");
    // Fields the broker does not read may hold anything well-formed.
    EXPECT_TRUE(scan_exact(with_field(3, bytes({0x71}) + be32(1))).has_value());
    EXPECT_TRUE(scan_exact(with_field(9, str8("not a timestamp"))).has_value());
}

TEST(message_codec_malformed, section_order_violations) {
    const std::string h = section(header, bytes({0x45}));
    const std::string da = section(delivery_annotations, map8({}));
    const std::string ma = section(message_annotations, map8({}));
    const std::string p = section(properties, bytes({0x45}));
    const std::string ap = section(application_properties, map8({}));
    const std::string d = section(data, vbin8("x"));
    const std::string seq = section(amqp_sequence, bytes({0x45}));
    const std::string v = section(amqp_value, bytes({0x40}));
    const std::string f = section(footer, map8({}));

    EXPECT_TRUE(scan_exact(h + da + ma + p + ap + d + d + f).has_value());
    const std::pair<std::string, const char*> bad[] = {
        {p + h, "header section comes after a later section"},
        {ma + da, "delivery-annotations"},
        {ap + p, "properties"},
        {d + ap, "application-properties"},
        {f + v, "amqp-value"},
        {h + h, "header section appears twice"},
        {p + p, "appears twice"},
        {f + f, "footer section appears twice"},
        {v + v, "amqp-value section appears twice"},
        {d + seq, "amqp-sequence section follows a data body section"},
        {seq + d, "data section follows a amqp-sequence body section"},
        {v + d, "follows a amqp-value"},
        {d + v, "follows a data"},
        {v + f + d, "data"},
    };
    for (const auto& [b, mentions] : bad) {
        expect_error(b, codec_errc::section_order, mentions);
    }
    // The offset is where the offending section starts.
    expect_error(h + p + ma, codec_errc::section_order, "offset 8");
}

} // namespace
} // namespace wharf::amqp
