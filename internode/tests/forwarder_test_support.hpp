#pragma once
// Helpers for the forwarder's tests: a log of done() calls, encoded test
// messages, and raw TCP sockets that stand in for a broken peer.
// Test thread only, except outcome_log's callbacks (the forwarder's thread).

#include "internode/forwarder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace wharf::internode {
// For test messages (found by argument-dependent lookup, so beside the types).
std::ostream& operator<<(std::ostream& o, forward_result r);
std::ostream& operator<<(std::ostream& o, const forward_outcome& out);
} // namespace wharf::internode

namespace wharf::internode::test {

using namespace std::chrono_literals;

// Records every done() call by message index: how often, with what, and
// whether it ran on the thread that created the log (which must never
// happen: done is never called inline).
class outcome_log {
  public:
    outcome_log() : creator_(std::this_thread::get_id()) {}

    forward_callback callback(size_t index);
    // Waits (bounded) until done() has been called `n` times in all.
    bool wait_for_calls(size_t n, std::chrono::milliseconds timeout = 20s);
    size_t calls();
    // The first outcome of each of messages 0..n-1 (failed "never reported"
    // for one that has none).
    std::vector<forward_outcome> outcomes(size_t n);
    // Every message 0..n-1 reported exactly once, none on the creator's thread.
    ::testing::AssertionResult exactly_once(size_t n);

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::vector<forward_outcome>> got_;
    size_t calls_ = 0;
    size_t inline_calls_ = 0;
    std::thread::id creator_;
};

// Polls pred about every millisecond until it holds or the time is up.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s);

// forwarder_options for 127.0.0.1:port.
forwarder_options local_options(uint16_t port);

// ---- messages -------------------------------------------------------------

// The encoded form of test message `i`: properties (id, subject, content
// type), application properties, message annotations and a body whose type
// and size vary with i (string, binary with every byte value, a list).
std::string encoded_message(size_t i, size_t body_bytes = 0);
// `bytes` with a footer section appended (Proton's codec cannot write one).
std::string with_footer(std::string bytes, size_t i);

// ---- sockets --------------------------------------------------------------

// A TCP listener on 127.0.0.1 with an OS-chosen port that never speaks AMQP.
// The kernel completes connections into its backlog, so a client connects
// and then hears nothing.
class silent_listener {
  public:
    silent_listener();
    ~silent_listener();
    silent_listener(const silent_listener&) = delete;
    silent_listener& operator=(const silent_listener&) = delete;
    uint16_t port() const { return port_; }
    // Accepts one connection (bounded wait); false if none came.
    bool accept_one(std::chrono::milliseconds timeout = 10s);
    // Resets every accepted connection (RST, as if the peer's host died).
    void reset_accepted();
    // Plays a peer that hangs right after opening, on the last accepted
    // connection: completes SASL ANONYMOUS, sends an AMQP open with a 100 ms
    // idle-time-out, then answers nothing. Returns once the client has sent
    // a heartbeat (proof that it took the open), false at the timeout.
    bool open_then_hang(std::chrono::milliseconds timeout = 10s);

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
    std::vector<int> accepted_;
};

// A port on 127.0.0.1 that is bound but not listening, so connecting to it
// is refused, and no one else can take it while this object lives.
class refused_port {
  public:
    refused_port();
    ~refused_port();
    refused_port(const refused_port&) = delete;
    refused_port& operator=(const refused_port&) = delete;
    uint16_t port() const { return port_; }

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

} // namespace wharf::internode::test
