#pragma once
// raw_peer: a bare Proton-C connection for tests that speak the protocol
// between nodes, as another node's relay would, and look at what the C++
// API hides: link properties of the answer, deliveries whose bytes are not
// AMQP messages (relay batches, control records), and the credit a node
// puts on the wire.
//
// Owned and run by the test's thread only: its proactor has no thread of
// its own and moves only inside run_until(), whose every wait is
// pn_proactor_wait with the proactor's timeout as the deadline.

#include <proton/link.h>
#include <proton/proactor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wharf::server::test {

class raw_peer {
  public:
    explicit raw_peer(const std::string& address); // "127.0.0.1:PORT"
    ~raw_peer();
    raw_peer(const raw_peer&) = delete;
    raw_peer& operator=(const raw_peer&) = delete;

    using properties = std::vector<std::pair<std::string, std::string>>; // a link's, symbol -> string
    // Opened now; the attach goes out at the next run_until().
    pn_link_t* open_sender(const std::string& address, const properties& props = {});
    // A sender to a transaction coordinator (AMQP 1.0 §4.2), as a client
    // opens before it declares a transaction.
    pn_link_t* open_coordinator();
    // Grants `credit` and keeps it topped up (unless !top_up); a
    // pre-settled one asks for at-most-once delivery.
    pn_link_t* open_receiver(const std::string& address, int credit, bool presettled = false, bool top_up = true,
                             uint64_t max_message_size = 0, const properties& props = {});
    // Takes back what is left of a receiver's credit (a flow with
    // link-credit 0), as AMQP allows a receiver to at any time.
    void take_credit_back(pn_link_t* receiver);
    // Detaches and closes a link (at the next run_until()).
    void close(pn_link_t* l) { pn_link_close(l); }
    bool remote_closed(pn_link_t* l) const;
    size_t received_count(pn_link_t* receiver) const;

    // Handles Proton's events until pred() holds, the connection ends or
    // the timeout passes; returns pred().
    bool run_until(const std::function<bool()>& pred,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

    // One unsettled delivery with these bytes (Proton sends it when the
    // link has credit).
    void send(pn_link_t* sender, const std::string& bytes);

    bool remote_opened(pn_link_t* l) const;
    // A string value of the peer's link properties ("" if none).
    std::string remote_property(pn_link_t* l, const std::string& key) const;
    // The whole deliveries that came on a receiver since the last call
    // (taken off the link and settled).
    std::vector<std::string> take_received(pn_link_t* receiver);
    // The same, each decoded as a message with a string body: the bodies.
    std::vector<std::string> take_received_texts(pn_link_t* receiver);
    // A sender's deliveries the peer settled, and how many of those it accepted.
    size_t settled(pn_link_t* sender) const { return count(settled_, sender); }
    size_t accepted(pn_link_t* sender) const { return count(accepted_, sender); }
    // The most credit the peer gave a sender at any time, as Proton counts it.
    int max_credit(pn_link_t* sender) const;
    bool ended() const { return ended_; }
    const std::string& error() const { return error_; }

  private:
    void handle(pn_event_t* e);
    static size_t count(const std::map<pn_link_t*, size_t>& m, pn_link_t* l) {
        auto it = m.find(l);
        return it == m.end() ? 0 : it->second;
    }

    pn_proactor_t* proactor_ = nullptr;
    pn_connection_t* conn_ = nullptr;
    pn_session_t* session_ = nullptr;
    uint64_t next_tag_ = 0;
    std::map<pn_link_t*, int> window_;                    // receivers: the credit they keep
    std::map<pn_link_t*, std::vector<std::string>> received_;
    std::map<pn_link_t*, size_t> settled_, accepted_;
    std::map<pn_link_t*, int> max_credit_;
    bool ended_ = false;
    std::string error_;
};

} // namespace wharf::server::test
