// The relay batch format (relay_batch.hpp): what one node writes, the other
// reads back; what is not a batch is refused, not misread.
#include "broker/server/relay_batch.hpp"

#include <gtest/gtest.h>
#include <proton/condition.h>
#include <proton/object.h>

#include <string>
#include <vector>

namespace wharf::server::relay {
namespace {

TEST(relay_batch, records_come_back_as_written) {
    std::string batch;
    append_record(batch, false, "first");
    append_record(batch, true, "");
    append_record(batch, false, std::string(70000, 'x'));
    std::vector<record> out;
    ASSERT_TRUE(parse_batch(batch, out));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_FALSE(out[0].settled);
    EXPECT_EQ(out[0].bytes, "first");
    EXPECT_TRUE(out[1].settled);
    EXPECT_EQ(out[1].bytes, "");
    EXPECT_EQ(out[2].bytes.size(), 70000u);
}

TEST(relay_batch, what_is_not_a_batch_is_refused) {
    std::string batch;
    append_record(batch, false, "message");
    std::vector<record> out;
    EXPECT_FALSE(parse_batch("", out)) << "empty";
    EXPECT_FALSE(parse_batch(batch.substr(0, batch.size() - 1), out)) << "cut short";
    EXPECT_FALSE(parse_batch(batch.substr(0, 3), out)) << "a header cut short";
    std::string bad_flags = batch;
    bad_flags[0] = 4;
    EXPECT_FALSE(parse_batch(bad_flags, out)) << "unknown flags";
    EXPECT_FALSE(parse_batch(batch + "x", out)) << "bytes after the last record";
}

TEST(relay_batch, failures_survive_a_condition) {
    pn_condition_t* c = pn_condition();
    put_failures(c, {{2, "amqp:decode-error", "message is not valid AMQP"}, {5, "amqp:x", ""}});
    auto back = get_failures(c);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].index, 2u);
    EXPECT_EQ(back[0].name, "amqp:decode-error");
    EXPECT_EQ(back[0].description, "message is not valid AMQP");
    EXPECT_EQ(back[1].index, 5u);
    pn_condition_set_name(c, "amqp:internal-error");
    EXPECT_TRUE(get_failures(c).empty()) << "another condition lists no failures";
    pn_condition_free(c);
}

} // namespace
} // namespace wharf::server::relay
