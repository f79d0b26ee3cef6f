#pragma once
// relay_hub: the node's pool of connections to other nodes for relayed
// links — a few slots per peer node, each opened on first need and forgotten
// when it ends (the next relayed attach in that slot opens a new one).
//
// A client connection's links to one peer all use the same slot (chosen by
// the client connection's serial), so the owner sees that client's frames in
// the order the client sent them — "settle a message, then send" on a full
// queue behaves as it does on a single node. Different clients spread over
// the slots.
//
// The hub also keeps the relay's credit budget. A relayed producer may send
// what the owner allows, but at most its share of producer_credit_budget:
// the messages in flight through this node for all relayed producers. If
// each link got the owner's full window, 1,000 producers would put a
// million messages in flight through one relaying node. Every client then
// works through that backlog before it gets to its newer links, and their
// attaches look stalled although this node opened them within a second.
// The share has a floor (20 a link), so with many producers it is the
// client connection's credit pool that bounds them (relay_credit): relayed
// producers take their credit from it like local ones.
//
// Threads: peer() is called on client connections' threads; connections are
// opened through the server (its proactor and connection table). Thread-safe.

#include "broker/server/credit_budget.hpp"
#include "broker/server/relay_protocol.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wharf::server {

class relay_hub {
  public:
    static constexpr size_t connections_per_peer = 2;
    // Opens a connection to host:port and returns its mailbox (null if the
    // node is stopping).
    using connect_fn = std::function<std::shared_ptr<relay::mailbox>(const std::string& node,
                                                                     const std::string& host, uint16_t port)>;
    explicit relay_hub(connect_fn connect) : connect_(std::move(connect)) {}

    // A live connection to the node at host:port, for one more link of the
    // client connection numbered `client`.
    std::shared_ptr<relay::mailbox> peer(const std::string& node, const std::string& host, uint16_t port,
                                         uint64_t client);
    // A peer connection ended: do not hand it out again.
    void lost(const relay::mailbox* m);

    // Relayed producers share 20,000 messages in flight through this node
    // (see credit_budget); a share counts while its link is open.
    static constexpr uint64_t producer_credit_budget = 20000;
    credit_budget& producers() { return producers_; }
    // The credit one relayed producer may hold now. Any thread.
    uint64_t producer_window() const { return producers_.window(UINT64_MAX); }

  private:
    struct pool {
        std::shared_ptr<relay::mailbox> slots[connections_per_peer];
    };
    connect_fn connect_;
    std::mutex mu_;
    std::map<std::string, pool> pools_; // by host:port
    credit_budget producers_{producer_credit_budget};
};

} // namespace wharf::server
