// scan_message on well-formed messages (Proton-encoded and hand-built), and
// encode_header / with_header checked against Proton's decoder.

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/tests/amqp_builder.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace wharf::amqp {
namespace {

using namespace wharf::amqp::test;

message_info scan_ok(std::string_view b) {
    auto r = scan_message(b);
    EXPECT_TRUE(r.has_value()) << (r.has_value() ? "" : r.error().description);
    return r.has_value() ? r.value() : message_info{};
}

void put_map_entry(pn_data_t* d, std::string_view key, std::string_view value, bool symbol_key) {
    symbol_key ? pn_data_put_symbol(d, pn_str(key)) : pn_data_put_string(d, pn_str(key));
    pn_data_put_string(d, pn_str(value));
}

// A message with every section Proton can write and every header/properties
// field set; `body` fills the body.
pn_message_ptr full_pn_message() {
    auto m = make_pn_message();
    pn_message_t* msg = m.get();
    pn_message_set_durable(msg, true);
    pn_message_set_priority(msg, 7);
    pn_message_set_ttl(msg, 60000);
    pn_message_set_first_acquirer(msg, true);
    pn_message_set_delivery_count(msg, 5);

    pn_atom_t id{};
    id.type = PN_ULONG;
    id.u.as_ulong = 42;
    pn_message_set_id(msg, id);
    pn_message_set_user_id(msg, pn_str("alice"));
    pn_message_set_address(msg, "queue/orders");
    pn_message_set_subject(msg, "new order");
    pn_message_set_reply_to(msg, "temp/reply-1");
    pn_atom_t corr{};
    corr.type = PN_STRING;
    corr.u.as_bytes = pn_str("corr-7");
    pn_message_set_correlation_id(msg, corr);
    pn_message_set_content_type(msg, "application/json");
    pn_message_set_content_encoding(msg, "gzip");
    pn_message_set_expiry_time(msg, 1700000000123);
    pn_message_set_creation_time(msg, 1699999999000);
    pn_message_set_group_id(msg, "group-a");
    pn_message_set_group_sequence(msg, 3);
    pn_message_set_reply_to_group_id(msg, "group-b");

    pn_data_t* da = pn_message_instructions(msg);
    pn_data_put_map(da);
    pn_data_enter(da);
    put_map_entry(da, "x-opt-da", "da-value", true);
    pn_data_exit(da);

    pn_data_t* ma = pn_message_annotations(msg);
    pn_data_put_map(ma);
    pn_data_enter(ma);
    put_map_entry(ma, "x-opt-jms-dest", "queue", true);
    pn_data_put_symbol(ma, pn_str("x-opt-count"));
    pn_data_put_long(ma, -9);
    pn_data_exit(ma);

    pn_data_t* ap = pn_message_properties(msg);
    pn_data_put_map(ap);
    pn_data_enter(ap);
    put_map_entry(ap, "colour", "blue", false);
    put_map_entry(ap, "long", std::string(300, 'L'), false); // str32
    pn_data_put_string(ap, pn_str("n"));
    pn_data_put_int(ap, -100000);
    pn_data_put_string(ap, pn_str("d"));
    pn_data_put_double(ap, 2.5);
    pn_data_put_string(ap, pn_str("b"));
    pn_data_put_bool(ap, true);
    pn_data_put_string(ap, pn_str("nothing"));
    pn_data_put_null(ap);
    pn_data_exit(ap);
    return m;
}

// An amqp-value body that exercises most of the type system.
void put_rich_value(pn_data_t* d) {
    pn_data_put_map(d);
    pn_data_enter(d);
    pn_data_put_string(d, pn_str("list"));
    pn_data_put_list(d);
    pn_data_enter(d);
    pn_data_put_ubyte(d, 1);
    pn_data_put_byte(d, -1);
    pn_data_put_ushort(d, 65535);
    pn_data_put_short(d, -2);
    pn_data_put_uint(d, 0);
    pn_data_put_uint(d, 7);
    pn_data_put_uint(d, 1u << 30);
    pn_data_put_int(d, 5);
    pn_data_put_int(d, -1 << 30);
    pn_data_put_char(d, 0x1F600);
    pn_data_put_ulong(d, 0);
    pn_data_put_ulong(d, 200);
    pn_data_put_ulong(d, 1ull << 60);
    pn_data_put_long(d, 3);
    pn_data_put_long(d, -(1ll << 60));
    pn_data_put_timestamp(d, 1234567);
    pn_data_put_float(d, 1.5f);
    pn_data_put_double(d, -0.25);
    pn_data_put_decimal32(d, 7);
    pn_data_put_decimal64(d, 8);
    pn_decimal128_t dec{};
    dec.bytes[15] = 9;
    pn_data_put_decimal128(d, dec);
    pn_uuid_t uuid{};
    uuid.bytes[0] = 0x12;
    pn_data_put_uuid(d, uuid);
    pn_data_put_binary(d, pn_str(std::string(500, '\x01')));
    pn_data_put_symbol(d, pn_str(std::string(400, 's')));
    pn_data_put_bool(d, false);
    pn_data_put_null(d);
    pn_data_put_list(d); // empty list
    pn_data_exit(d);

    pn_data_put_string(d, pn_str("ints"));
    pn_data_put_array(d, false, PN_INT);
    pn_data_enter(d);
    for (int i = 0; i < 10; ++i) {
        pn_data_put_int(d, i * 1000);
    }
    pn_data_exit(d);

    pn_data_put_string(d, pn_str("strings"));
    pn_data_put_array(d, false, PN_STRING);
    pn_data_enter(d);
    pn_data_put_string(d, pn_str("a"));
    pn_data_put_string(d, pn_str("bb"));
    pn_data_exit(d);

    pn_data_put_string(d, pn_str("described-array"));
    pn_data_put_array(d, true, PN_DOUBLE);
    pn_data_enter(d);
    pn_data_put_symbol(d, pn_str("array-descriptor"));
    pn_data_put_double(d, 1.1);
    pn_data_put_double(d, 1.2);
    pn_data_exit(d);

    pn_data_put_string(d, pn_str("described"));
    pn_data_put_described(d);
    pn_data_enter(d);
    pn_data_put_symbol(d, pn_str("value-descriptor"));
    pn_data_put_string(d, pn_str("the value"));
    pn_data_exit(d);
    pn_data_exit(d);
}

void expect_full_fields(const message_info& info) {
    EXPECT_TRUE(info.has_header);
    EXPECT_TRUE(info.header.durable);
    EXPECT_EQ(info.header.priority, 7);
    EXPECT_EQ(info.header.ttl_ms, 60000u);
    EXPECT_TRUE(info.header.first_acquirer);
    EXPECT_EQ(info.header.delivery_count, 5u);
    EXPECT_EQ(info.to, "queue/orders");
    EXPECT_EQ(info.reply_to, "temp/reply-1");
    EXPECT_EQ(info.absolute_expiry_ms, 1700000000123);
    EXPECT_EQ(info.message_id_code, 0x53); // smallulong 42
    EXPECT_EQ(info.correlation_id_code, 0xa1);
    EXPECT_TRUE(info.has_body);
}

TEST(message_codec_scan, proton_message_with_every_section_and_amqp_value_body) {
    auto m = full_pn_message();
    put_rich_value(pn_message_body(m.get()));
    const std::string b = pn_encode(m.get());
    const message_info info = scan_ok(b);
    expect_full_fields(info);
    // The header is the first section; the next one is delivery-annotations.
    ASSERT_LT(info.header_end, b.size());
    EXPECT_EQ(b.substr(info.header_end, 3), bytes({0x00, 0x53, delivery_annotations}));
    EXPECT_EQ(b.substr(0, 3), bytes({0x00, 0x53, header}));
}

TEST(message_codec_scan, proton_message_with_data_body) {
    auto m = full_pn_message();
    pn_message_set_inferred(m.get(), true);
    pn_data_put_binary(pn_message_body(m.get()), pn_str(std::string(70000, 'x'))); // vbin32
    const std::string b = pn_encode(m.get());
    ASSERT_NE(b.find(bytes({0x00, 0x53, data, 0xb0})), std::string::npos);
    expect_full_fields(scan_ok(b));
}

TEST(message_codec_scan, proton_message_with_amqp_sequence_body) {
    auto m = full_pn_message();
    pn_message_set_inferred(m.get(), true);
    pn_data_t* body = pn_message_body(m.get());
    pn_data_put_list(body);
    pn_data_enter(body);
    pn_data_put_string(body, pn_str("one"));
    pn_data_put_int(body, 2);
    pn_data_exit(body);
    const std::string b = pn_encode(m.get());
    ASSERT_NE(b.find(bytes({0x00, 0x53, amqp_sequence})), std::string::npos);
    expect_full_fields(scan_ok(b));
}

TEST(message_codec_scan, proton_default_message_reads_defaults) {
    auto m = make_pn_message();
    const std::string b = pn_encode(m.get());
    const message_info info = scan_ok(b);
    EXPECT_TRUE(info.has_header); // Proton always writes a header, as list0
    EXPECT_FALSE(info.header.durable);
    EXPECT_EQ(info.header.priority, 4);
    EXPECT_FALSE(info.header.ttl_ms);
    EXPECT_FALSE(info.header.first_acquirer);
    EXPECT_EQ(info.header.delivery_count, 0u);
    EXPECT_FALSE(info.to);
    EXPECT_FALSE(info.reply_to);
    EXPECT_FALSE(info.absolute_expiry_ms);
    EXPECT_FALSE(info.has_body);
}

TEST(message_codec_scan, hand_built_with_symbol_descriptors_and_footer) {
    const std::string b =
        symbol_section("amqp:header:list", list8({bytes({0x41}), bytes({0x50, 9}), bytes({0x52, 30}), bytes({0x42}),
                                                  bytes({0x70, 0, 1, 0, 0})})) +
        symbol_section("amqp:delivery-annotations:map", map8({sym8("k"), str8("v")})) +
        symbol_section("amqp:message-annotations:map", map32({sym8("k"), bytes({0x44})})) +
        symbol_section("amqp:properties:list",
                       list8({bytes({0x40}), bytes({0x40}), sym8("topic/x"), bytes({0x40}), str32("back")})) +
        symbol_section("amqp:application-properties:map", map8({str8("a"), bytes({0x54, 0xff})})) +
        symbol_section("amqp:data:binary", vbin8("abc")) + symbol_section("amqp:data:binary", vbin32("def")) +
        bytes({0x00}) + sym32("amqp:footer:map") + map8({sym8("x-hash"), vbin8("0123")});
    const message_info info = scan_ok(b);
    EXPECT_TRUE(info.has_header);
    EXPECT_TRUE(info.header.durable);
    EXPECT_EQ(info.header.priority, 9);
    EXPECT_EQ(info.header.ttl_ms, 30u);
    EXPECT_FALSE(info.header.first_acquirer);
    EXPECT_EQ(info.header.delivery_count, 65536u);
    EXPECT_EQ(info.to, "topic/x");
    EXPECT_EQ(info.reply_to, "back");
    EXPECT_FALSE(info.absolute_expiry_ms);
    EXPECT_TRUE(info.has_body);
    EXPECT_EQ(b.substr(info.header_end, 1), bytes({0x00}));
}

TEST(message_codec_scan, hand_built_with_ulong_descriptors) {
    const std::string b = ulong_section(header, list32({bytes({0x56, 1})})) +
                          ulong_section(properties, list32({bytes({0x40}), bytes({0x40}), sym32("q")})) +
                          ulong_section(amqp_value, bytes({0x40})) + ulong_section(footer, bytes({0x40}));
    const message_info info = scan_ok(b);
    EXPECT_TRUE(info.header.durable);
    EXPECT_EQ(info.to, "q");
    EXPECT_TRUE(info.has_body);
    EXPECT_EQ(info.header_end, 10 + list32({bytes({0x56, 1})}).size());
}

TEST(message_codec_locate, finds_the_sections_scan_message_finds_and_stops_at_the_body) {
    const std::string head = symbol_section("amqp:header:list", list8({bytes({0x41}), bytes({0x50, 9})})) +
                             section(message_annotations, map8({sym8("k"), str8("v")}));
    const std::string props = section(properties, list32({bytes({0x40}), bytes({0x40}), str8("q")}));
    const std::string app = symbol_section("amqp:application-properties:map", map32({str8("a"), str8("b")}));
    const std::string b = head + props + app + section(data, vbin8("abc"));
    const message_info info = scan_ok(b);
    const auto spans = locate_sections(b);
    ASSERT_TRUE(spans.has_value());
    EXPECT_EQ(spans->header_at, 0u);
    EXPECT_EQ(spans->header_end, info.header_end);
    EXPECT_EQ(spans->properties_at, info.properties_at);
    EXPECT_EQ(spans->properties_end, info.properties_end);
    EXPECT_EQ(spans->application_properties_at, head.size() + props.size());
    EXPECT_EQ(spans->application_properties_end, info.application_properties_end);
    // The body is not read: a message cut inside it still locates, one cut
    // inside the properties does not.
    EXPECT_TRUE(locate_sections(b.substr(0, b.size() - 1)).has_value());
    EXPECT_FALSE(locate_sections(b.substr(0, head.size() + props.size() - 1)).has_value());
    const auto none = locate_sections(section(amqp_value, str8("x")));
    ASSERT_TRUE(none.has_value());
    EXPECT_EQ(none->header_end, 0u);
    EXPECT_EQ(none->application_properties_end, 0u);
}

TEST(message_codec_scan, message_without_header) {
    const std::string b = section(properties, list8({bytes({0x40}), bytes({0x40}), str8("q")})) +
                          section(amqp_value, str8("hello"));
    const message_info info = scan_ok(b);
    EXPECT_FALSE(info.has_header);
    EXPECT_EQ(info.header_end, 0u);
    EXPECT_EQ(info.header.priority, 4);
    EXPECT_EQ(info.to, "q");
}

TEST(message_codec_scan, message_without_body) {
    const message_info info = scan_ok(section(header, bytes({0x45})) + section(properties, bytes({0x45})));
    EXPECT_FALSE(info.has_body);
}

TEST(message_codec_scan, repeated_data_and_sequence_sections) {
    EXPECT_TRUE(scan_ok(section(data, vbin8("a")) + section(data, vbin8("")) + section(data, vbin32("c"))).has_body);
    EXPECT_TRUE(scan_ok(section(amqp_sequence, bytes({0x45})) + section(amqp_sequence, list8({bytes({0x43})}))).has_body);
}

TEST(message_codec_scan, header_field_encodings) {
    // Nulls mean default; extra fields beyond the five known are skipped.
    message_info info = scan_ok(section(header, list8({bytes({0x40}), bytes({0x40}), bytes({0x40}), bytes({0x40}),
                                                        bytes({0x40}), str8("future"), list8({})})));
    EXPECT_FALSE(info.header.durable);
    EXPECT_EQ(info.header.priority, 4);
    EXPECT_FALSE(info.header.ttl_ms);
    EXPECT_EQ(info.header.delivery_count, 0u);

    info = scan_ok(section(header, list8({bytes({0x56, 0}), bytes({0x50, 0}), bytes({0x43}), bytes({0x56, 1}),
                                          bytes({0x52, 255})})));
    EXPECT_FALSE(info.header.durable);
    EXPECT_EQ(info.header.priority, 0);
    EXPECT_EQ(info.header.ttl_ms, 0u); // present and zero is not absent
    EXPECT_TRUE(info.header.first_acquirer);
    EXPECT_EQ(info.header.delivery_count, 255u);

    info = scan_ok(section(header, bytes({0x40}))); // a null header is all defaults
    EXPECT_TRUE(info.has_header);
    EXPECT_EQ(info.header.priority, 4);
}

TEST(message_codec_scan, properties_every_field) {
    const std::string props = list8({
        vbin8("id"), vbin8("user"), str32("to-addr"), str8("subject"), sym8("reply-addr"), bytes({0x53, 9}),
        sym8("text/plain"), sym8("utf8"), bytes({0x83}) + be64(uint64_t(-5)), bytes({0x83}) + be64(1), str8("g"),
        bytes({0x52, 1}), str8("rg"), str8("extra field from the future"),
    });
    const message_info info = scan_ok(section(properties, props));
    EXPECT_EQ(info.to, "to-addr");
    EXPECT_EQ(info.reply_to, "reply-addr");
    EXPECT_EQ(info.absolute_expiry_ms, -5); // timestamps are signed
    EXPECT_EQ(info.message_id_code, 0xa0);
    EXPECT_EQ(info.correlation_id_code, 0x53);
}

TEST(message_codec_scan, ids_of_any_type_are_taken_and_their_types_told) {
    // A queue passes any message-id on; what answers by it (management)
    // asks is_message_id_code whether AMQP allows it.
    const message_info info =
        scan_ok(section(properties, list8({sym8("an-id"), bytes({0x40}), bytes({0x40}), bytes({0x40}),
                                           bytes({0x40}), bytes({0x54, 3})})));
    EXPECT_EQ(info.message_id_code, 0xa3);
    EXPECT_EQ(info.correlation_id_code, 0x54);
    EXPECT_FALSE(is_message_id_code(info.message_id_code));
    EXPECT_FALSE(is_message_id_code(info.correlation_id_code));
    EXPECT_EQ(scan_ok(section(properties, list8({}))).message_id_code, 0x40); // absent: null
    for (uint8_t ok : {0x40, 0x44, 0x53, 0x80, 0x98, 0xa0, 0xb0, 0xa1, 0xb1}) EXPECT_TRUE(is_message_id_code(ok)) << +ok;
    for (uint8_t no : {0x00, 0x41, 0x52, 0x54, 0x71, 0x81, 0x83, 0xa3, 0xb3, 0xc0, 0xc1, 0xe0})
        EXPECT_FALSE(is_message_id_code(no)) << +no;
}

TEST(message_codec_scan, every_primitive_and_compound_type_in_a_value) {
    std::vector<std::string> items = {
        bytes({0x40}), bytes({0x41}), bytes({0x42}), bytes({0x43}), bytes({0x44}), bytes({0x45}),
        bytes({0x50, 1}), bytes({0x51, 1}), bytes({0x52, 1}), bytes({0x53, 1}), bytes({0x54, 1}),
        bytes({0x55, 1}), bytes({0x56, 1}), bytes({0x60, 1, 2}), bytes({0x61, 1, 2}),
        bytes({0x00, 0x53, 0x10}) + bytes({0x45}), // described
    };
    for (int code : {0x70, 0x71, 0x72, 0x73, 0x74}) {
        items.push_back(bytes({code}) + be32(1));
    }
    for (int code : {0x80, 0x81, 0x82, 0x83, 0x84}) {
        items.push_back(bytes({code}) + be64(1));
    }
    items.push_back(bytes({0x94}) + std::string(16, '\7'));
    items.push_back(bytes({0x98}) + std::string(16, '\7'));
    items.push_back(vbin8("x"));
    items.push_back(str8(""));
    items.push_back(sym8("s"));
    items.push_back(vbin32(std::string(300, 'v')));
    items.push_back(str32("s"));
    items.push_back(sym32("s"));
    items.push_back(map8({str8("k"), list32({map32({})})}));
    items.push_back(array8(bytes({0x71}), 3, be32(1) + be32(2) + be32(3)));
    items.push_back(array8(bytes({0x40}), 200, ""));                                 // zero-width elements
    items.push_back(array32(bytes({0x43}), 0xffffffffu, ""));                        // huge count, zero width
    items.push_back(array8(bytes({0xa1}), 2, bytes({1, 'a', 2, 'b', 'c'})));        // str8 elements
    items.push_back(array32(bytes({0xb3}), 1, be32(2) + "ab"));                     // sym32 elements
    items.push_back(array8(bytes({0x00, 0xa3, 1, 'd', 0x52}), 2, bytes({5, 6})));  // described elements
    items.push_back(array8(bytes({0x00, 0x00, 0x53, 1, 0x53, 2, 0x41}), 0, ""));    // nested descriptors
    items.push_back(array8(bytes({0xe0}), 2, bytes({3, 1, 0x50, 3, 3, 1, 0x50, 4}))); // array of arrays
    items.push_back(array8(bytes({0xc0}), 1, bytes({2, 1, 0x41})));                  // array of lists
    items.push_back(array32(bytes({0xd1}), 1, be32(4) + be32(0)));                   // array of empty map32
    items.push_back(array8(bytes({0x98}), 1, std::string(16, 'u')));
    const message_info info = scan_ok(section(amqp_value, list32(items)));
    EXPECT_TRUE(info.has_body);
}

TEST(message_codec_scan, moderate_nesting_is_accepted) {
    std::string v = bytes({0x45});
    for (int i = 0; i < 50; ++i) {
        v = list32({v});
    }
    EXPECT_TRUE(scan_ok(section(amqp_value, v)).has_body);
}

// --- encode_header ---------------------------------------------------------

TEST(message_codec_encode, minimal_encodings) {
    auto enc = [](const header_fields& h) {
        std::string out = "prefix";
        encode_header(h, out);
        EXPECT_EQ(out.substr(0, 6), "prefix"); // appends
        return out.substr(6);
    };
    EXPECT_EQ(enc({}), bytes({0x00, 0x53, 0x70, 0x45}));
    EXPECT_EQ(enc({.durable = true}), bytes({0x00, 0x53, 0x70, 0xc0, 2, 1, 0x41}));
    EXPECT_EQ(enc({.priority = 9}), bytes({0x00, 0x53, 0x70, 0xc0, 4, 2, 0x42, 0x50, 9}));
    EXPECT_EQ(enc({.ttl_ms = 0}), bytes({0x00, 0x53, 0x70, 0xc0, 5, 3, 0x42, 0x50, 4, 0x43}));
    EXPECT_EQ(enc({.ttl_ms = 255}), bytes({0x00, 0x53, 0x70, 0xc0, 6, 3, 0x42, 0x50, 4, 0x52, 255}));
    EXPECT_EQ(enc({.ttl_ms = 256}), bytes({0x00, 0x53, 0x70, 0xc0, 9, 3, 0x42, 0x50, 4, 0x70, 0, 0, 1, 0}));
    EXPECT_EQ(enc({.first_acquirer = true}), bytes({0x00, 0x53, 0x70, 0xc0, 6, 4, 0x42, 0x50, 4, 0x40, 0x41}));
    EXPECT_EQ(enc({.delivery_count = 1}),
              bytes({0x00, 0x53, 0x70, 0xc0, 8, 5, 0x42, 0x50, 4, 0x40, 0x42, 0x52, 1}));
    EXPECT_EQ(enc({true, 0, 0xffffffffu, true, 0xffffffffu}),
              bytes({0x00, 0x53, 0x70, 0xc0, 15, 5, 0x41, 0x50, 0, 0x70, 0xff, 0xff, 0xff, 0xff, 0x41, 0x70, 0xff,
                     0xff, 0xff, 0xff}));
}

TEST(message_codec_encode, every_combination_decodes_the_same_in_proton_and_scan_message) {
    const bool bools[] = {false, true};
    const uint8_t priorities[] = {0, 4, 9, 255};
    const std::optional<uint32_t> ttls[] = {std::nullopt, 1, 255, 256, std::numeric_limits<uint32_t>::max()};
    const uint32_t counts[] = {0, 1, 255, 256, std::numeric_limits<uint32_t>::max()};
    int cases = 0;
    for (bool durable : bools) {
        for (uint8_t priority : priorities) {
            for (const auto& ttl : ttls) {
                for (bool first : bools) {
                    for (uint32_t count : counts) {
                        const header_fields h{durable, priority, ttl, first, count};
                        std::string b;
                        encode_header(h, b);
                        b += section(amqp_value, str8("body"));

                        const message_info info = scan_ok(b);
                        EXPECT_EQ(info.header.durable, durable);
                        EXPECT_EQ(info.header.priority, priority);
                        EXPECT_EQ(info.header.ttl_ms, ttl);
                        EXPECT_EQ(info.header.first_acquirer, first);
                        EXPECT_EQ(info.header.delivery_count, count);
                        EXPECT_EQ(info.header_end, b.size() - 9);

                        auto m = make_pn_message();
                        ASSERT_EQ(pn_message_decode(m.get(), b.data(), b.size()), 0);
                        EXPECT_EQ(pn_message_is_durable(m.get()), durable);
                        EXPECT_EQ(pn_message_get_priority(m.get()), priority);
                        EXPECT_EQ(pn_message_get_ttl(m.get()), ttl.value_or(0));
                        EXPECT_EQ(pn_message_is_first_acquirer(m.get()), first);
                        EXPECT_EQ(pn_message_get_delivery_count(m.get()), count);
                        ++cases;
                    }
                }
            }
        }
    }
    EXPECT_EQ(cases, 400);
}

// --- with_header -------------------------------------------------------------

TEST(message_codec_with_header, replaces_proton_header_and_keeps_the_rest_byte_exact) {
    auto m = full_pn_message();
    put_rich_value(pn_message_body(m.get()));
    const std::string original = pn_encode(m.get());
    const message_info before = scan_ok(original);

    const header_fields redelivered{false, 2, std::nullopt, false, 6};
    const std::string out = with_header(original, before, redelivered);
    const message_info after = scan_ok(out);
    EXPECT_FALSE(after.header.durable);
    EXPECT_EQ(after.header.priority, 2);
    EXPECT_FALSE(after.header.ttl_ms);
    EXPECT_FALSE(after.header.first_acquirer);
    EXPECT_EQ(after.header.delivery_count, 6u);
    EXPECT_EQ(out.substr(after.header_end), original.substr(before.header_end));
    EXPECT_EQ(after.to, before.to);
    EXPECT_EQ(after.reply_to, before.reply_to);
    EXPECT_EQ(after.absolute_expiry_ms, before.absolute_expiry_ms);

    // Proton reads the result, and everything but the header is as sent.
    auto decoded = make_pn_message();
    ASSERT_EQ(pn_message_decode(decoded.get(), out.data(), out.size()), 0);
    EXPECT_EQ(pn_message_get_delivery_count(decoded.get()), 6u);
    EXPECT_EQ(pn_message_get_priority(decoded.get()), 2);
    EXPECT_STREQ(pn_message_get_address(decoded.get()), "queue/orders");
    EXPECT_STREQ(pn_message_get_group_id(decoded.get()), "group-a");
    EXPECT_EQ(pn_message_get_creation_time(decoded.get()), 1699999999000);
    pn_message_set_durable(decoded.get(), true);
    pn_message_set_priority(decoded.get(), 7);
    pn_message_set_ttl(decoded.get(), 60000);
    pn_message_set_first_acquirer(decoded.get(), true);
    pn_message_set_delivery_count(decoded.get(), 5);
    EXPECT_EQ(pn_encode(decoded.get()), original);
}

TEST(message_codec_with_header, inserts_a_header_when_there_was_none) {
    const std::string original = section(message_annotations, map8({sym8("k"), bytes({0x41})})) +
                                 section(data, vbin8("payload")) + section(footer, map8({}));
    const message_info before = scan_ok(original);
    ASSERT_FALSE(before.has_header);
    const std::string out = with_header(original, before, {.durable = true, .delivery_count = 1});
    const message_info after = scan_ok(out);
    EXPECT_TRUE(after.has_header);
    EXPECT_TRUE(after.header.durable);
    EXPECT_EQ(after.header.delivery_count, 1u);
    EXPECT_EQ(out.substr(after.header_end), original);
}

TEST(message_codec_with_header, default_header_becomes_list0_and_repeats_stably) {
    const std::string original =
        symbol_section("amqp:header:list", list32({bytes({0x41}), bytes({0x50, 1})})) + section(amqp_value, bytes({0x40}));
    const message_info before = scan_ok(original);
    std::string out = with_header(original, before, {});
    EXPECT_EQ(out, bytes({0x00, 0x53, 0x70, 0x45}) + section(amqp_value, bytes({0x40})));
    // Redelivering again and again only ever touches the header.
    for (uint32_t n = 1; n <= 300; ++n) {
        const message_info info = scan_ok(out);
        ASSERT_EQ(info.header.delivery_count, n - 1);
        out = with_header(out, info, {.delivery_count = n});
    }
    EXPECT_EQ(scan_ok(out).header.delivery_count, 300u);
    EXPECT_EQ(out.substr(out.size() - 4), section(amqp_value, bytes({0x40})));
}

// A header with fields after delivery-count (a later AMQP version's) keeps
// them, as sent, when a redelivery rewrites it: they were dropped. A list8
// stays a list8 while it fits; beyond 255 bytes the header is a list32.
TEST(message_codec_with_header, fields_after_delivery_count_are_kept) {
    for (const std::string& extra : {str8("x"), str32(std::string(300, 'y'))}) {
        const std::string fields = bytes({0x41, 0x50, 7, 0x40, 0x42, 0x43}) + extra;
        const std::string original = section(header, list32({bytes({0x41}), bytes({0x50, 7}), bytes({0x40}),
                                                              bytes({0x42}), bytes({0x43}), extra})) +
                                     section(amqp_value, bytes({0x40}));
        const message_info before = scan_ok(original);
        EXPECT_EQ(before.header.extra, extra);
        EXPECT_EQ(before.header.extra_count, 1u);
        header_fields h = before.header;
        h.delivery_count = 1;
        const std::string out = with_header(original, before, h);
        const message_info after = scan_ok(out);
        EXPECT_EQ(after.header.delivery_count, 1u);
        EXPECT_EQ(after.header.priority, 7);
        EXPECT_TRUE(after.header.durable);
        EXPECT_EQ(after.header.extra, extra) << "the sixth field is gone";
        EXPECT_EQ(out.substr(after.header_end), section(amqp_value, bytes({0x40})));
        auto m = make_pn_message();
        EXPECT_EQ(pn_message_decode(m.get(), out.data(), out.size()), 0) << "Proton reads it";
        EXPECT_EQ(pn_message_get_delivery_count(m.get()), 1u);
    }
}

} // namespace
} // namespace wharf::amqp
