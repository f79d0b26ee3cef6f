// The process: ready line, SIGTERM shutdown, bad configuration.

#include "broker/server/tests/component_test.hpp"

#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace wharf::server::test {
namespace {

class lifecycle : public component_test {};

TEST_F(lifecycle, prints_exactly_one_listening_line) {
    auto& b = start_broker({.node_id = "node-7"});
    // (No std::regex: g++ 12 warns inside <regex> under the sanitizer build.)
    EXPECT_EQ(b.ready_line(), "wharfd node-7 listening on 127.0.0.1:" + std::to_string(b.port()));
    EXPECT_NE(b.port(), 0);
}

// The startup line says which malloc serves the node: jemalloc in a normal
// build, "system" where jemalloc is off (WHARF_JEMALLOC=OFF, and always under
// the sanitizers, whose allocator must own malloc).
TEST_F(lifecycle, startup_line_names_the_allocator) {
    auto& b = start_broker();
    const std::string log = b.stderr_text();
    const auto at = log.find("allocator: ");
    ASSERT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.substr(at + 11, std::string(WHARFD_ALLOCATOR).size()), WHARFD_ALLOCATOR) << log;
}

TEST_F(lifecycle, sigterm_closes_connections_with_forced_and_exits_0) {
    auto& b = start_broker();
    auto c = connect();
    test_receiver r = c->open_receiver("shutdown", receiver_credit(10));
    ASSERT_TRUE(r.wait_open());
    EXPECT_EQ(b.stop(), std::optional<int>(0));
    auto err = c->wait_error();
    ASSERT_TRUE(err.has_value()) << "the client saw no error when the broker stopped";
    EXPECT_EQ(err->name, "amqp:connection:forced") << *err;
}

TEST_F(lifecycle, sigterm_with_no_connections_exits_0) {
    auto& b = start_broker();
    EXPECT_EQ(b.stop(), std::optional<int>(0));
}

// Every worker stops, however many (the default is one less than the
// cores): with three or more the node used to hang in its stop for good,
// one worker asleep in the proactor.
TEST_F(lifecycle, sigterm_stops_every_worker_whatever_their_number) {
    for (const char* threads : {"3", "4", "8"}) {
        auto& b = start_broker({.args = {"--threads", threads}});
        auto c = connect();
        test_receiver r = c->open_receiver("stop", receiver_credit(1));
        ASSERT_TRUE(r.wait_open());
        EXPECT_EQ(b.stop(), std::optional<int>(0)) << threads << " workers";
    }
}

// One worker polls for its next event before it sleeps (busy-poll). Messages
// sent one at a time, each after the last arrived, keep it polling between
// them: they must all arrive in order, and SIGTERM must still stop it.
TEST_F(lifecycle, one_polling_worker_moves_messages_one_at_a_time_and_stops) {
    auto& b = start_broker({.args = {"--threads", "1", "--busy-poll", "2000"}});
    auto c = connect();
    test_sender s = c->open_sender("ping");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    test_receiver r = c->open_receiver("ping", receiver_credit(1000));
    ASSERT_TRUE(r.wait_open());
    constexpr size_t n = 300;
    for (size_t i = 0; i < n; ++i) {
        s.send(text_message("p" + std::to_string(i)));
        ASSERT_EQ(s.wait_outcome(i).kind, outcome_kind::accepted) << "message " << i;
        ASSERT_EQ(r.wait_messages(i + 1).size(), i + 1) << "message " << i << " did not arrive";
    }
    EXPECT_EQ(bodies(r.wait_messages(n)), expected_texts(0, static_cast<int>(n), "p"));
    r.settle_all(settle_as::accept);
    EXPECT_EQ(b.stop(), std::optional<int>(0));
}

// The producer keeps the polling worker busy with one message at a time on
// its own connection; the engine hands each message to the consumer's
// connection with a Proton wake. Those wakes must be taken while the worker
// polls: the consumer gets messages while the producer is still sending,
// not only once the producer stops and the worker sleeps.
TEST_F(lifecycle, a_polling_worker_still_serves_a_consumer_on_another_connection) {
    start_broker({.args = {"--threads", "1", "--busy-poll", "2000"}});
    auto consumer = connect();
    test_receiver r = consumer->open_receiver("handoff", receiver_credit(5000));
    ASSERT_TRUE(r.wait_open());
    auto producer = connect();
    test_sender s = producer->open_sender("handoff");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    constexpr size_t n = 2000;
    size_t seen_by_half = 0;
    for (size_t i = 0; i < n; ++i) {
        s.send(text_message("h" + std::to_string(i)));
        ASSERT_EQ(s.wait_outcome(i).kind, outcome_kind::accepted) << "message " << i;
        if (i == n / 2) seen_by_half = r.message_count();
    }
    EXPECT_GT(seen_by_half, 0u) << "the consumer got nothing while the producer sent " << n / 2
                                << " messages one at a time";
    EXPECT_EQ(bodies(r.wait_messages(n)), expected_texts(0, static_cast<int>(n), "h"));
    r.settle_all(settle_as::accept);
}

TEST_F(lifecycle, unknown_config_key_exits_2_and_names_the_key) {
    wharfd_process p({.config_toml = "node-id = \"x\"\nno-such-key = 1\n",
                      .on_stop = exit_check::ignore});
    EXPECT_FALSE(p.listening());
    EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), std::optional<int>(2));
    EXPECT_NE(p.stderr_text().find("no-such-key"), std::string::npos) << p.stderr_text();
}

TEST_F(lifecycle, unknown_queue_key_exits_2_and_names_the_key) {
    wharfd_process p({.config_toml = "[[queue]]\nname = \"q\"\nmax-depth-mesages = 5\n",
                      .on_stop = exit_check::ignore});
    EXPECT_FALSE(p.listening());
    EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), std::optional<int>(2));
    EXPECT_NE(p.stderr_text().find("max-depth-mesages"), std::string::npos) << p.stderr_text();
}

// A second listener that cannot listen: no ready line at all (the first
// listener's used to come before the exit, and a supervisor took the node
// for started), exit 1, and the reason on stderr even with the log off.
TEST_F(lifecycle, a_listener_that_cannot_listen_stops_the_node_before_it_says_ready) {
    const int busy = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(busy, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(busy, 1), 0);
    socklen_t len = sizeof a;
    ASSERT_EQ(::getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len), 0);
    const std::string taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    wharfd_process p({.args = {"--listen", "127.0.0.1:0", "--listen", taken},
                      .log_level = "off",
                      .on_stop = exit_check::ignore});
    EXPECT_FALSE(p.listening()) << p.ready_line();
    EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), std::optional<int>(1));
    EXPECT_NE(p.stderr_text().find("cannot listen on " + taken), std::string::npos) << p.stderr_text();
    ::close(busy);
}

TEST_F(lifecycle, bad_flag_value_exits_2_and_names_the_flag) {
    wharfd_process p({.args = {"--max-connections", "lots"}, .on_stop = exit_check::ignore});
    EXPECT_FALSE(p.listening());
    EXPECT_EQ(p.wait_exit(std::chrono::seconds(10)), std::optional<int>(2));
    EXPECT_NE(p.stderr_text().find("max-connections"), std::string::npos) << p.stderr_text();
}

} // namespace
} // namespace wharf::server::test
