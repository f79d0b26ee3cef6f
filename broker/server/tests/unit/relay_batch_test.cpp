// The relay batch format (relay_batch.hpp): what one node writes, the other
// reads back; what is not a batch is refused, not misread.
#include "broker/server/relay_batch.hpp"

#include <gtest/gtest.h>
#include <proton/condition.h>
#include <proton/disposition.h>
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

TEST(relay_batch, consumer_records_carry_sequence_flags_and_bytes) {
    std::string batch;
    auto put = [&](uint8_t flags, uint64_t seq, std::string_view bytes) {
        char header[delivery_header];
        put_delivery_header(header, flags, seq, bytes.size());
        batch.append(header, sizeof header);
        batch.append(bytes);
    };
    put(presettled, 1, "one");
    put(0, 0x0102030405060708ULL, std::string(70000, 'y'));
    put(drained, 0, "");
    std::vector<delivery_record> out;
    ASSERT_TRUE(parse_deliveries(batch, out));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].flags, presettled);
    EXPECT_EQ(out[0].seq, 1u);
    EXPECT_EQ(out[0].bytes, "one");
    EXPECT_EQ(out[1].seq, 0x0102030405060708ULL) << "all eight bytes of the sequence number survive";
    EXPECT_EQ(out[1].bytes.size(), 70000u);
    EXPECT_EQ(out[2].flags, drained);
    EXPECT_FALSE(parse_deliveries("", out)) << "empty";
    EXPECT_FALSE(parse_deliveries(batch.substr(0, batch.size() - 1), out)) << "cut short";
    EXPECT_FALSE(parse_deliveries(batch.substr(0, 5), out)) << "a header cut short";
    std::string bad = batch;
    bad[0] = 4;
    EXPECT_FALSE(parse_deliveries(bad, out)) << "unknown flags";
}

TEST(relay_batch, control_records_come_back_as_written) {
    std::string in;
    append_control(in, {control::credit, 7, 1000000, 1});
    append_control(in, {control::outcome, 0xffffffffffULL, 42, 2});
    std::vector<control> out;
    ASSERT_TRUE(parse_controls(in, out));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].what, control::credit);
    EXPECT_EQ(out[0].link, 7u);
    EXPECT_EQ(out[0].value, 1000000u);
    EXPECT_EQ(out[0].arg, 1);
    EXPECT_EQ(out[1].what, control::outcome);
    EXPECT_EQ(out[1].link, 0xffffffffffULL);
    EXPECT_EQ(out[1].value, 42u);
    EXPECT_EQ(out[1].arg, 2);
    EXPECT_FALSE(parse_controls("", out)) << "empty";
    EXPECT_FALSE(parse_controls(in.substr(1), out)) << "not whole records";
    std::string bad = in;
    bad[0] = 9;
    EXPECT_FALSE(parse_controls(bad, out)) << "unknown kind";
}

// An annotated outcome carries the client's map after the fixed part, and
// the records around it still read as written.
TEST(relay_batch, an_annotated_outcome_carries_its_map_between_fixed_records) {
    const std::string map("\xc1\x05\x02\xa3\x01k\x40", 7);
    std::string in;
    append_control(in, {control::credit, 1, 10, 0, {}});
    append_control(in, {control::annotated, 2, 42, 3, map});
    append_control(in, {control::outcome, 3, 43, 0, {}});
    std::vector<control> out;
    ASSERT_TRUE(parse_controls(in, out));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[1].what, control::annotated);
    EXPECT_EQ(out[1].link, 2u);
    EXPECT_EQ(out[1].value, 42u);
    EXPECT_EQ(out[1].arg, 3);
    EXPECT_EQ(out[1].annotations, map);
    EXPECT_EQ(out[2].what, control::outcome);
    EXPECT_EQ(out[2].value, 43u);
    EXPECT_TRUE(out[2].annotations.empty());
    // Cut inside the map, or inside its length: refused, never read past the end.
    std::string annotated;
    append_control(annotated, {control::annotated, 2, 42, 3, map});
    for (size_t cut = control_size; cut < annotated.size(); ++cut)
        EXPECT_FALSE(parse_controls(std::string_view(annotated).substr(0, cut), out)) << "cut at " << cut;
}

TEST(relay_batch, a_clients_disposition_maps_to_the_queues_outcome) {
    using engine::outcome_kind;
    EXPECT_EQ(outcome_for(PN_ACCEPTED, false, false, true), outcome_kind::accepted);
    EXPECT_EQ(outcome_for(PN_REJECTED, false, false, true), outcome_kind::rejected);
    EXPECT_EQ(outcome_for(PN_RELEASED, false, false, false), outcome_kind::released);
    EXPECT_EQ(outcome_for(PN_MODIFIED, false, false, true), outcome_kind::released) << "plain modified";
    EXPECT_EQ(outcome_for(PN_MODIFIED, true, false, true), outcome_kind::modified_failed);
    EXPECT_EQ(outcome_for(PN_MODIFIED, false, true, true), outcome_kind::modified_undeliverable);
    EXPECT_EQ(outcome_for(PN_MODIFIED, true, true, true), outcome_kind::modified_failed_undeliverable);
    EXPECT_EQ(outcome_for(PN_RECEIVED, false, false, false), std::nullopt) << "not terminal, not settled";
    EXPECT_EQ(outcome_for(0, false, false, true), outcome_kind::accepted) << "settled with no outcome";
}

} // namespace
} // namespace wharf::server::relay
