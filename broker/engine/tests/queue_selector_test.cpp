// Consumers with a JMS selector: each gets only what it selects; what it
// skips stays for the others; a message put back is offered again.

#include "broker/amqp/selector.hpp"
#include "broker/engine/tests/engine_fixture.hpp"

namespace wharf::engine::testing {
namespace {

// A message with application-properties {colour: `colour`} and an
// amqp-value body `body`.
std::string coloured(const std::string& colour, const std::string& body) {
    std::string props;
    props += "\xa1\x06" "colour";
    props += '\xa1';
    props += static_cast<char>(colour.size());
    props += colour;
    std::string out("\x00\x53\x74\xc1", 4);
    out += static_cast<char>(props.size() + 1);
    out += '\x02';
    out += props;
    out += std::string("\x00\x53\x77\xa1", 4);
    out += static_cast<char>(body.size());
    out += body;
    return out;
}

std::string body_of(const ev_deliver& d) {
    const std::string_view b = d.body.bytes();
    return std::string(b.substr(b.rfind('\xa1') + 2));
}

link_id selecting(engine_fixture& f, const std::string& selector, uint64_t credit) {
    static link_id next = 1000;
    const link_id id = ++next;
    cmd_attach_consumer c{id, "q", false, false, false, f.out};
    c.selector = amqp::selector::parse(selector).value();
    f.engine->post(std::move(c));
    f.engine->post(cmd_credit{id, credit, false});
    return id;
}

TEST(queue_selector, each_consumer_gets_what_it_selects_and_the_rest_stays) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {coloured("blue", "b0"), coloured("red", "r1"), coloured("blue", "b2"), coloured("red", "r3")});
    const link_id reds = selecting(f, "colour = 'red'", 10);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(body_of(d[0]), "r1");
    EXPECT_EQ(body_of(d[1]), "r3");
    EXPECT_EQ(d[0].link, reds);
    EXPECT_EQ(f.stats("q").depth, 4u) << "two delivered, two waiting";
    auto plain = f.consumer("q", 10);
    d = f.deliveries();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].link, plain);
    EXPECT_EQ(body_of(d[0]), "b0");
    EXPECT_EQ(body_of(d[1]), "b2");
}

// The consumer passed over the blues once; a red put back below them (the
// other consumer released it) is still offered to it.
TEST(queue_selector, a_message_put_back_behind_the_skipped_ones_is_offered_again) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {coloured("red", "r0"), coloured("blue", "b1"), coloured("blue", "b2")});
    auto plain = f.consumer("q", 1);
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(body_of(d[0]), "r0");
    const link_id reds = selecting(f, "colour = 'red'", 10);
    EXPECT_TRUE(f.deliveries().empty()) << "a blue message went to the red consumer";
    f.settle(plain, d[0].seq, outcome_kind::released);
    d = f.deliveries();
    ASSERT_EQ(d.size(), 1u) << "the released red never reached the consumer that selects it";
    EXPECT_EQ(d[0].link, reds);
    EXPECT_EQ(body_of(d[0]), "r0");
}

// Two selecting consumers share a queue by what they select, whatever the
// order of the messages and however often the one with credit is offered a
// message only the other selects.
TEST(queue_selector, two_selecting_consumers_each_get_their_own) {
    engine_fixture f;
    auto p = f.producer("q");
    const link_id reds = selecting(f, "colour = 'red'", 100);
    const link_id blues = selecting(f, "colour = 'blue'", 100);
    std::vector<std::string> bodies;
    for (int i = 0; i < 20; ++i) bodies.push_back(coloured(i % 3 == 0 ? "red" : "blue", std::to_string(i)));
    f.publish(p, bodies);
    size_t red = 0, blue = 0;
    for (const auto& d : f.deliveries()) {
        const int n = std::stoi(body_of(d));
        EXPECT_EQ(d.link, n % 3 == 0 ? reds : blues) << "message " << n;
        (d.link == reds ? red : blue)++;
    }
    EXPECT_EQ(red, 7u);
    EXPECT_EQ(blue, 13u);
}

TEST(queue_selector, a_browser_sees_only_what_it_selects) {
    engine_fixture f;
    auto p = f.producer("q");
    f.publish(p, {coloured("blue", "b0"), coloured("red", "r1")});
    const link_id id = 7777;
    cmd_attach_consumer c{id, "q", false, true, false, f.out};
    c.selector = amqp::selector::parse("colour = 'red'").value();
    f.engine->post(std::move(c));
    f.engine->post(cmd_credit{id, 10, false});
    auto d = f.deliveries();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(body_of(d[0]), "r1");
    EXPECT_EQ(f.stats("q").depth, 2u) << "a browser took a message";
}

} // namespace
} // namespace wharf::engine::testing
