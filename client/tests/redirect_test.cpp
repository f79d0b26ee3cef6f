// The client library against real wharfd nodes: links opened at a node that
// does not own the queue end up at the owner without the application seeing
// the redirect; what a plain Proton client sees instead; and the errors:
// unreachable targets, redirect loops, not-found passing through unchanged.

#include "client/cluster_client.hpp"
#include "client/tests/cluster_fixture.hpp"
#include "client/tests/mini_broker.hpp"
#include "client/tests/redirect_peer.hpp"
#include "client/tests/test_app.hpp"

#include <gtest/gtest.h>

#include <proton/codec/map.hpp>
#include <proton/symbol.hpp>
#include <proton/value.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace wharf::client::test {
namespace {

std::vector<std::string> numbered(const std::string& prefix, int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(prefix + std::to_string(i));
    return out;
}

// A port that takes TCP connections (the kernel completes the handshake into
// the backlog) and never says a word: no AMQP header, no open.
class silent_listener {
  public:
    silent_listener() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 16) == 0 &&
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port_ = ntohs(a.sin_port);
    }
    ~silent_listener() {
        if (fd_ >= 0) ::close(fd_);
    }
    silent_listener(const silent_listener&) = delete;
    silent_listener& operator=(const silent_listener&) = delete;
    uint16_t port() const { return port_; }

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

bool mentions(const std::vector<std::string>& events, const std::string& part) {
    for (const auto& e : events)
        if (e.find(part) != std::string::npos) return true;
    return false;
}

TEST(redirect_client, links_opened_at_a_non_owner_end_at_the_owner) {
    two_node_cluster cluster;
    ASSERT_TRUE(cluster.ok());
    recorded_link rcv, snd;
    client_app app;
    rcv.set_ref(app.client().open_receiver(cluster.url(1), "orders", rcv));
    ASSERT_TRUE(rcv.wait_open()) << ::testing::PrintToString(rcv.events());
    snd.set_ref(app.client().open_sender(cluster.url(1), "orders", snd));
    ASSERT_TRUE(snd.wait_open()) << ::testing::PrintToString(snd.events());

    // Both are served by n2; neither saw an error, a close or a second open.
    EXPECT_EQ(rcv.node(), "n2");
    EXPECT_EQ(snd.node(), "n2");
    EXPECT_EQ(rcv.events(), (std::vector<std::string>{"redirect:n1->" + cluster.url(2), "receiver_open@n2"}));
    EXPECT_EQ(snd.events(), (std::vector<std::string>{"redirect:n1->" + cluster.url(2), "sender_open@n2"}));
    EXPECT_EQ(rcv.ref().node_address(), cluster.url(2));
    EXPECT_EQ(snd.ref().redirects(), 1);

    snd.send(numbered("m", 0, 20));
    ASSERT_TRUE(snd.wait_accepted(20));
    ASSERT_TRUE(rcv.wait_received(20));
    EXPECT_EQ(rcv.received(), numbered("m", 0, 20));

    // One connection per node: the second redirect reused the first one's.
    auto conns = app.client().connections();
    ASSERT_EQ(conns.size(), 2u);
    for (const auto& c : conns) EXPECT_TRUE(c.open) << c.address;
    EXPECT_FALSE(rcv.failure());
}

TEST(redirect_client, a_link_at_the_owner_is_not_redirected) {
    two_node_cluster cluster;
    ASSERT_TRUE(cluster.ok());
    recorded_link rcv;
    client_app app;
    rcv.set_ref(app.client().open_receiver(cluster.url(2), "direct", rcv));
    ASSERT_TRUE(rcv.wait_open());
    EXPECT_EQ(rcv.events(), (std::vector<std::string>{"receiver_open@n2"}));
    EXPECT_EQ(app.client().connections().size(), 1u);
}

TEST(redirect_client, plain_proton_sees_the_redirect_and_its_info_map) {
    two_node_cluster cluster;
    ASSERT_TRUE(cluster.ok());
    for (bool sender : {false, true}) {
        SCOPED_TRACE(sender ? "sender" : "receiver");
        const proton::error_condition e = raw_attach(cluster.url(1), "info-q", sender);
        ASSERT_EQ(e.name(), "amqp:link:redirect") << e.what();
        EXPECT_NE(e.description().find("node n2 at " + cluster.url(2)), std::string::npos) << e.description();
        const proton::value props = e.properties();
        ASSERT_EQ(props.type(), proton::MAP);
        const auto info = proton::get<std::map<proton::symbol, proton::value>>(props);
        ASSERT_EQ(info.size(), 4u);
        EXPECT_EQ(proton::get<std::string>(info.at(proton::symbol("hostname"))), "127.0.0.1");
        EXPECT_EQ(proton::get<std::string>(info.at(proton::symbol("network-host"))), "127.0.0.1");
        ASSERT_EQ(info.at(proton::symbol("port")).type(), proton::UINT);
        EXPECT_EQ(proton::get<uint32_t>(info.at(proton::symbol("port"))), cluster.port(2));
        EXPECT_EQ(proton::get<std::string>(info.at(proton::symbol("address"))), "info-q");
    }
}

TEST(redirect_client, an_unreachable_target_is_a_clear_error) {
    cluster_options o;
    o.n2_unreachable = true;
    two_node_cluster cluster(o);
    ASSERT_TRUE(cluster.ok());
    recorded_link rcv;
    client_app app;
    rcv.set_ref(app.client().open_receiver(cluster.url(1), "lost", rcv));
    const auto f = rcv.wait_failure();
    ASSERT_TRUE(f) << ::testing::PrintToString(rcv.events());
    EXPECT_EQ(f->condition.name(), redirect_unreachable);
    EXPECT_EQ(f->address, "lost");
    EXPECT_FALSE(f->sender);
    const std::string d = f->condition.description();
    EXPECT_NE(d.find("n1 (" + cluster.url(1) + ") redirected the link to 127.0.0.1:" +
                     std::to_string(cluster.port(2))),
              std::string::npos)
        << d;
    EXPECT_NE(d.find("cannot be reached"), std::string::npos) << d;
    EXPECT_FALSE(mentions(rcv.events(), "receiver_open"));
}

// A redirect to a node that accepts the TCP connection and never answers
// fails after attach_timeout, naming the target. It used to wait for ever.
TEST(redirect_client, a_target_that_never_answers_fails_after_the_attach_timeout) {
    silent_listener silent;
    ASSERT_NE(silent.port(), 0);
    redirect_peer peer("peer-a");
    ASSERT_NE(peer.port(), 0);
    peer.redirect_to(silent.port());
    client_options o;
    o.attach_timeout = std::chrono::seconds(1);
    recorded_link rcv;
    client_app app(o);
    rcv.set_ref(app.client().open_receiver("127.0.0.1:" + std::to_string(peer.port()), "mute", rcv));
    const auto f = rcv.wait_failure();
    ASSERT_TRUE(f) << ::testing::PrintToString(rcv.events());
    EXPECT_EQ(f->condition.name(), redirect_unreachable);
    const std::string target = "127.0.0.1:" + std::to_string(silent.port());
    const std::string d = f->condition.description();
    EXPECT_NE(d.find("queue 'mute': peer-a (127.0.0.1:" + std::to_string(peer.port()) +
                     ") redirected the link to " + target + ", which cannot be reached"),
              std::string::npos)
        << d;
    EXPECT_NE(d.find("no open from " + target + " within 1 s"), std::string::npos) << d;
    EXPECT_FALSE(mentions(rcv.events(), "receiver_open"));
}

// A node that opens the connection but never answers the attach: the link
// fails after attach_timeout, saying so (the open had come in time).
TEST(redirect_client, an_attach_never_answered_fails_after_the_attach_timeout) {
    mini_broker_options m;
    m.mute_address = "mute";
    mini_broker node(m);
    ASSERT_NE(node.port(), 0);
    client_options o;
    o.attach_timeout = std::chrono::seconds(1);
    recorded_link rcv;
    client_app app(o);
    rcv.set_ref(app.client().open_receiver(node.url(), "mute", rcv));
    const auto f = rcv.wait_failure();
    ASSERT_TRUE(f) << ::testing::PrintToString(rcv.events());
    EXPECT_EQ(f->condition.name(), attach_failed);
    EXPECT_EQ(f->condition.description(), "queue 'mute': no attach from " + node.url() + " within 1 s");
    EXPECT_FALSE(mentions(rcv.events(), "receiver_open"));
}

TEST(redirect_client, not_found_reaches_the_application_unchanged) {
    server::test::wharfd_options w;
    w.config_toml = "auto-create-queues = false\n";
    server::test::wharfd_process node(w);
    ASSERT_TRUE(node.listening());
    const proton::error_condition raw = raw_attach(node.url(), "nowhere", false);
    ASSERT_EQ(raw.name(), "amqp:not-found") << raw.what();

    recorded_link rcv, snd;
    client_app app;
    rcv.set_ref(app.client().open_receiver(node.url(), "nowhere", rcv));
    snd.set_ref(app.client().open_sender(node.url(), "nowhere", snd));
    ASSERT_TRUE(rcv.wait_closed());
    ASSERT_TRUE(snd.wait_closed());
    // The refusal's attach (null source) is not shown as an open; the error
    // and the close are Proton's own events with the broker's condition.
    EXPECT_EQ(rcv.events(), (std::vector<std::string>{"receiver_error:amqp:not-found", "receiver_close"}));
    EXPECT_EQ(snd.events(), (std::vector<std::string>{"sender_error:amqp:not-found", "sender_close"}));
    EXPECT_FALSE(rcv.failure());
}

TEST(redirect_client, a_redirect_loop_stops_after_max_redirects) {
    redirect_peer a("peer-a"), b("peer-b");
    ASSERT_NE(a.port(), 0);
    ASSERT_NE(b.port(), 0);
    a.redirect_to(b.port());
    b.redirect_to(a.port());
    client_options o;
    o.max_redirects = 5;
    recorded_link snd;
    client_app app(o);
    snd.set_ref(app.client().open_sender("127.0.0.1:" + std::to_string(a.port()), "loop", snd));
    const auto f = snd.wait_failure();
    ASSERT_TRUE(f) << ::testing::PrintToString(snd.events());
    EXPECT_EQ(f->condition.name(), too_many_redirects);
    EXPECT_TRUE(f->sender);
    const std::string pa = "peer-a (127.0.0.1:" + std::to_string(a.port()) + ")";
    const std::string pb = "peer-b (127.0.0.1:" + std::to_string(b.port()) + ")";
    EXPECT_NE(f->condition.description().find("more than 5 redirects: " + pa + " -> " + pb + " -> " + pa),
              std::string::npos)
        << f->condition.description();
    EXPECT_EQ(a.attaches() + b.attaches(), 6); // the first attach and 5 redirects followed
    EXPECT_FALSE(mentions(snd.events(), "sender_open"));
    EXPECT_EQ(app.client().connections().size(), 2u); // each peer's connection was reused
}

// Each peer opens the link and redirects it in the same breath: the link is
// open every time, but never for redirect_count_reset, so the count goes on.
TEST(redirect_client, a_loop_of_links_that_open_and_are_redirected_at_once_stops_too) {
    for (bool sender : {true, false}) {
        SCOPED_TRACE(sender ? "sender" : "receiver");
        redirect_peer a("peer-a", {.open_then_redirect = true}), b("peer-b", {.open_then_redirect = true});
        ASSERT_NE(a.port(), 0);
        ASSERT_NE(b.port(), 0);
        a.redirect_to(b.port());
        b.redirect_to(a.port());
        client_options o;
        o.max_redirects = 5;
        o.redirect_count_reset = std::chrono::seconds(10);
        recorded_link l;
        client_app app(o);
        const std::string url = "127.0.0.1:" + std::to_string(a.port());
        l.set_ref(sender ? app.client().open_sender(url, "loop", l) : app.client().open_receiver(url, "loop", l));
        const auto f = l.wait_failure();
        ASSERT_TRUE(f) << "redirects followed: " << l.ref().redirects();
        EXPECT_EQ(f->condition.name(), too_many_redirects);
        const std::string pa = "peer-a (127.0.0.1:" + std::to_string(a.port()) + ")";
        const std::string pb = "peer-b (127.0.0.1:" + std::to_string(b.port()) + ")";
        EXPECT_NE(f->condition.description().find("more than 5 redirects: " + pa + " -> " + pb + " -> " + pa),
                  std::string::npos)
            << f->condition.description();
        EXPECT_EQ(a.attaches() + b.attaches(), 6);
        EXPECT_EQ(l.ref().redirects(), 5);
    }
}

TEST(redirect_client, in_flight_messages_of_a_redirected_sender_are_released_and_sent_again) {
    server::test::wharfd_process node;
    ASSERT_TRUE(node.listening());
    redirect_peer peer("peer-a", {.hold = 3}); // takes 3 messages, settles none, then redirects
    ASSERT_NE(peer.port(), 0);
    peer.redirect_to(node.port());
    recorded_link snd, rcv; // handlers outlive the client
    client_app app;
    snd.set_ref(app.client().open_sender("127.0.0.1:" + std::to_string(peer.port()), "held", snd));
    ASSERT_TRUE(snd.wait_open());
    EXPECT_EQ(snd.node(), "peer-a");
    snd.send(numbered("m", 0, 5));
    ASSERT_TRUE(snd.wait_open(2)) << ::testing::PrintToString(snd.events());
    ASSERT_TRUE(snd.wait_accepted(5)) << ::testing::PrintToString(snd.events());
    EXPECT_EQ(snd.node(), "ct");
    EXPECT_EQ(snd.released(), 5u); // every one was in flight at the redirect
    EXPECT_EQ(snd.events(), (std::vector<std::string>{"sender_open@peer-a", "redirect:peer-a->" + node.url(),
                                                      "sender_open@ct"}));

    // The node got each message once.
    rcv.set_ref(app.client().open_receiver(node.url(), "held", rcv));
    ASSERT_TRUE(rcv.wait_received(5));
    auto got = rcv.received();
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, numbered("m", 0, 5));
}

TEST(redirect_client, a_bad_url_is_reported_at_once) {
    recorded_link snd;
    client_app app;
    EXPECT_FALSE(app.client().open_sender("amqp://", "q", snd).valid());
    const auto f = snd.failure();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->condition.name(), "amqp:invalid-field");
}

} // namespace
} // namespace wharf::client::test
