// The forwarder against a scripted peer: what the peer sees on the wire
// (container id, link names, targets, properties, settle modes) and every
// outcome and link ending the peer can give.

#include "internode/tests/forwarder_test_support.hpp"
#include "internode/tests/scripted_peer.hpp"

#include <proton/message.hpp>

#include <set>

namespace wharf::internode::test {
namespace {

// A message whose body tells the scripted peer what to do with it.
std::string order(const std::string& what) {
    proton::message m(what);
    std::vector<char> buf;
    m.encode(buf);
    return std::string(buf.begin(), buf.end());
}

class forwarder_with_peer : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_NE(peer_.port(), 0) << peer_.snapshot().error; }
    forwarder_options options() {
        auto o = local_options(peer_.port());
        o.link_properties = {{"wharf:forwarded-from", "n1"}, {"wharf:reason", "queue-move"}};
        return o;
    }
    scripted_peer peer_;
    outcome_log log_; // outlives every forwarder of the test
};

TEST_F(forwarder_with_peer, outcomes_follow_the_peers_dispositions) {
    forwarder fwd(options());
    fwd.send("a", order("accept"), log_.callback(0));
    fwd.send("a", order("release"), log_.callback(1));
    fwd.send("a", order("modify"), log_.callback(2));
    ASSERT_TRUE(log_.wait_for_calls(3));
    EXPECT_TRUE(log_.exactly_once(3));
    const auto outs = log_.outcomes(3);
    EXPECT_EQ(outs[0].result, forward_result::accepted) << outs[0];
    EXPECT_EQ(outs[1].result, forward_result::released) << outs[1];
    EXPECT_EQ(outs[2].result, forward_result::modified) << outs[2];
    EXPECT_EQ(outs[2].description, "delivery-failed, undeliverable-here");
    EXPECT_EQ(fwd.in_flight(), 0u);
}

TEST_F(forwarder_with_peer, peer_sees_our_container_id_link_properties_and_unsettled_transfers) {
    forwarder fwd(options());
    fwd.send("target-1", order("accept"), log_.callback(0));
    ASSERT_TRUE(log_.wait_for_calls(1));
    const peer_record rec = peer_.snapshot();
    EXPECT_EQ(rec.container_id, "forwarder-test");
    ASSERT_EQ(rec.links.size(), 1u);
    EXPECT_EQ(rec.links[0].target, "target-1");
    const std::map<std::string, std::string> expected{{"wharf:forwarded-from", "n1"},
                                                      {"wharf:reason", "queue-move"}};
    EXPECT_EQ(rec.links[0].properties, expected);
    EXPECT_TRUE(rec.links[0].sender_unsettled) << "snd-settle-mode is not unsettled";
    EXPECT_TRUE(rec.links[0].receiver_settles_first) << "rcv-settle-mode is not first";
    EXPECT_EQ(rec.presettled, 0u);
    EXPECT_TRUE(rec.error.empty()) << rec.error;
}

TEST_F(forwarder_with_peer, one_link_per_address_reused_for_later_messages) {
    forwarder fwd(options());
    for (size_t i = 0; i < 6; ++i) fwd.send(i % 2 ? "b" : "a", order("accept"), log_.callback(i));
    ASSERT_TRUE(log_.wait_for_calls(6));
    fwd.send("a", order("accept"), log_.callback(6));
    ASSERT_TRUE(log_.wait_for_calls(7));
    EXPECT_TRUE(log_.exactly_once(7));
    const peer_record rec = peer_.snapshot();
    ASSERT_EQ(rec.links.size(), 2u);
    std::set<std::string> targets{rec.links[0].target, rec.links[1].target};
    EXPECT_EQ(targets, (std::set<std::string>{"a", "b"}));
    EXPECT_NE(rec.links[0].name, rec.links[1].name);
    EXPECT_EQ(rec.bodies.size(), 7u);
}

TEST_F(forwarder_with_peer, detached_link_fails_its_messages_and_the_next_send_attaches_anew) {
    forwarder fwd(options());
    fwd.send("x", order("hold"), log_.callback(0));
    fwd.send("x", order("hold"), log_.callback(1));
    ASSERT_TRUE(peer_.wait_until([](const peer_record& r) { return r.bodies.size() == 2; }));
    EXPECT_EQ(log_.calls(), 0u) << "held messages were reported";
    fwd.send("x", order("detach"), log_.callback(2));
    ASSERT_TRUE(log_.wait_for_calls(3));
    for (const auto& o : log_.outcomes(3)) {
        EXPECT_EQ(o.result, forward_result::failed) << o;
        EXPECT_EQ(o.description, "amqp:internal-error: told to detach") << o;
    }
    EXPECT_FALSE(fwd.broken());

    fwd.send("x", order("accept"), log_.callback(3));
    ASSERT_TRUE(log_.wait_for_calls(4));
    EXPECT_TRUE(log_.exactly_once(4));
    EXPECT_EQ(log_.outcomes(4)[3].result, forward_result::accepted) << log_.outcomes(4)[3];
    const peer_record rec = peer_.snapshot();
    ASSERT_EQ(rec.links.size(), 2u);
    EXPECT_EQ(rec.links[1].target, "x");
    EXPECT_NE(rec.links[0].name, rec.links[1].name) << "link names must be unique";
}

TEST_F(forwarder_with_peer, done_may_send_again_from_the_forwarder_thread) {
    // Each outcome sends the next message from inside done(): this deadlocks
    // if done ran with a forwarder lock held.
    constexpr size_t n = 50;
    std::function<void(size_t)> send_from; // outlives fwd, whose thread calls it
    forwarder fwd(options());
    send_from = [&](size_t i) {
        auto record = log_.callback(i);
        fwd.send("chain", order("accept"), [&, i, record](forward_outcome out) {
            record(out);
            if (i + 1 < n) send_from(i + 1);
        });
    };
    send_from(0);
    ASSERT_TRUE(log_.wait_for_calls(n)) << log_.calls() << " of " << n;
    EXPECT_EQ(log_.outcomes(n)[n - 1].result, forward_result::accepted);
    EXPECT_EQ(peer_.snapshot().bodies.size(), n);
}

TEST_F(forwarder_with_peer, destroying_with_unsettled_messages_fails_them_as_closed) {
    auto fwd = std::make_unique<forwarder>(options());
    for (size_t i = 0; i < 5; ++i) fwd->send("h", order("hold"), log_.callback(i));
    ASSERT_TRUE(peer_.wait_until([](const peer_record& r) { return r.bodies.size() == 5; }));
    EXPECT_EQ(fwd->in_flight(), 5u);
    fwd.reset();
    EXPECT_TRUE(log_.exactly_once(5));
    for (const auto& o : log_.outcomes(5)) {
        EXPECT_EQ(o.result, forward_result::failed) << o;
        EXPECT_EQ(o.description, "forwarder closed") << o;
    }
}

} // namespace
} // namespace wharf::internode::test
