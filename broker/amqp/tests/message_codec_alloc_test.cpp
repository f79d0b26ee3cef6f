// The scanner is on the broker's hot path: scanning a well-formed message
// allocates nothing beyond the strings it returns. Counted by replacing the
// global operator new for this test binary.

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/selector.hpp"
#include "broker/amqp/tests/amqp_builder.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local int allocations = 0;
} // namespace

void* operator new(std::size_t n) {
    if (counting) {
        ++allocations;
    }
    if (void* p = std::malloc(n ? n : 1)) {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace wharf::amqp {
namespace {

using namespace wharf::amqp::test;

int allocations_during_scan(std::string_view b, bool& ok) {
    allocations = 0;
    counting = true;
    auto r = scan_message(b);
    counting = false;
    ok = r.has_value();
    return allocations;
}

TEST(message_codec_alloc, scanning_allocates_nothing_but_long_addresses) {
    auto m = make_pn_message();
    pn_message_set_durable(m.get(), true);
    pn_message_set_delivery_count(m.get(), 2);
    pn_message_set_address(m.get(), "queue/a");   // fits the small-string buffer
    pn_message_set_reply_to(m.get(), "reply/b");
    pn_message_set_expiry_time(m.get(), 12345);
    pn_data_t* ap = pn_message_properties(m.get());
    pn_data_put_map(ap);
    pn_data_enter(ap);
    pn_data_put_string(ap, pn_str("k"));
    pn_data_put_string(ap, pn_str(std::string(1000, 'v')));
    pn_data_exit(ap);
    pn_message_set_inferred(m.get(), true);
    pn_data_put_binary(pn_message_body(m.get()), pn_str(std::string(100000, 'x')));
    const std::string b = pn_encode(m.get());

    bool ok = false;
    EXPECT_EQ(allocations_during_scan(b, ok), 0);
    EXPECT_TRUE(ok);

    pn_message_set_address(m.get(), std::string(100, 'a').c_str()); // needs a heap string
    const std::string long_to = pn_encode(m.get());
    EXPECT_EQ(allocations_during_scan(long_to, ok), 1);
    EXPECT_TRUE(ok);
}

TEST(message_codec_alloc, redelivery_allocates_once) {
    const std::string b = section(header, bytes({0x45})) + section(data, vbin32(std::string(5000, 'd')));
    auto info = scan_message(b);
    ASSERT_TRUE(info.has_value());
    allocations = 0;
    counting = true;
    const std::string out = with_header(b, info.value(), {.delivery_count = 1});
    counting = false;
    EXPECT_EQ(allocations, 1);
    EXPECT_EQ(out.size(), b.size() + 9); // list0 (1 byte) became list8 of five fields (10)
}

// A selector runs once for each message a selecting consumer looks at.
TEST(message_codec_alloc, a_selector_reads_a_message_without_allocating) {
    auto m = make_pn_message();
    pn_message_set_priority(m.get(), 7);
    pn_data_t* ap = pn_message_properties(m.get());
    pn_data_put_map(ap);
    pn_data_enter(ap);
    pn_data_put_string(ap, pn_str("a_rather_long_property_name"));
    pn_data_put_int(ap, 3);
    pn_data_put_string(ap, pn_str("colour"));
    pn_data_put_string(ap, pn_str("a-red-too-long-for-a-short-string"));
    pn_data_exit(ap);
    pn_data_put_binary(pn_message_body(m.get()), pn_str(std::string(1000, 'x')));
    const std::string b = pn_encode(m.get());
    // Keys and values longer than a short string are compared where they
    // lie. (LIKE decodes the value into code points: not counted here.)
    auto s = selector::parse("colour = 'a-red-too-long-for-a-short-string' AND JMSPriority > 4 AND "
                             "a_rather_long_property_name = 3 AND JMSDeliveryMode = 'NON_PERSISTENT' AND "
                             "colour IN ('blue', 'a-red-too-long-for-a-short-string')");
    ASSERT_TRUE(s.has_value()) << s.error();
    allocations = 0;
    counting = true;
    const bool selected = s.value()->matches(b);
    counting = false;
    EXPECT_TRUE(selected);
    EXPECT_EQ(allocations, 0);
}

} // namespace
} // namespace wharf::amqp
