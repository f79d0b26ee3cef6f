#pragma once
// forwarder: hands encoded AMQP messages to another node over one AMQP 1.0
// connection, byte-exact and at-least-once. Used when a queue moves between
// nodes: the old owner reads each message from its queue, forwards it, and
// deletes it only once done() reports `accepted`.
//
// Owned by its caller (one per peer node). It runs its own Proton-C proactor
// on one thread of its own; every Proton object lives on that thread. send(),
// in_flight() and broken() may be called from any thread. done callbacks run
// on the forwarder's thread with no forwarder lock held.
//
// No reconnect: once the connection has ended, broken() is true and every
// send() fails; the caller makes a new forwarder.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace wharf::internode {

enum class forward_result { accepted, released, rejected, modified, failed };

// How one forwarded message ended. `description` says why for rejected
// (the peer's condition: "amqp:not-found: no queue 'x'"), modified (the
// flags the peer set) and failed (the link's or connection's condition, or
// what went wrong locally, e.g. "forwarder closed").
struct forward_outcome {
    forward_result result = forward_result::failed;
    std::string description;
};

const char* to_string(forward_result r);

struct forwarder_options {
    std::string host;
    uint16_t port = 0;
    std::string container_id;                           // ours, in the open frame
    std::map<std::string, std::string> link_properties; // on every sender attach (symbol -> string)
    // No AMQP open from the peer within this: the connection fails.
    std::chrono::milliseconds connect_timeout{5000};
    // The destructor waits this long for the peer to answer our close, then
    // drops the connection.
    std::chrono::milliseconds close_timeout{2000};
    // Asks the peer to send something at least this often (AMQP idle-timeout);
    // silence for longer fails the connection. 0 = none.
    std::chrono::milliseconds idle_timeout{60000};
    // Advisory only: the forwarder does not enforce it. Callers compare it
    // with in_flight() to decide when to stop reading their queue.
    size_t max_in_flight = 1000;
};

// What send() calls, exactly once per message. Must not throw.
using forward_callback = std::function<void(forward_outcome)>;

class forwarder {
  public:
    // Starts the proactor thread and connects at once (SASL ANONYMOUS).
    explicit forwarder(forwarder_options o);
    // Closes the connection (waits at most close_timeout for the peer's
    // answer) and joins the thread. Every message not yet settled by the peer
    // gets done({failed, "forwarder closed"}), on the forwarder's thread,
    // before this returns. Must not be called from a done callback.
    ~forwarder();
    forwarder(const forwarder&) = delete;
    forwarder& operator=(const forwarder&) = delete;

    // Queues one whole encoded AMQP message (its sections, as a producer sent
    // them) for the node `address` on the peer. Never blocks on the network
    // and never calls done on the caller's thread. The message goes out
    // unsettled on the sender link for `address` (attached on first use,
    // reused after) as soon as the peer gives credit. done reports the peer's
    // outcome, or `failed` if the link or connection ended first, or at once
    // (on the forwarder's thread) if broken() is already true.
    void send(const std::string& address, std::string bytes, forward_callback done);

    // Messages handed to send() whose done has not been called yet.
    size_t in_flight() const;
    // The connection has ended (failed, refused, timed out or closed).
    bool broken() const;

    class impl;

  private:
    std::unique_ptr<impl> impl_;
};

} // namespace wharf::internode
