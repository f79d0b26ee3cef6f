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
//
// Threads: peer() is called on client connections' threads; connections are
// opened through the server (its proactor and connection table). Thread-safe.

#include "broker/server/relay_protocol.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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

    static constexpr uint64_t producer_credit_budget = 20000;
    static constexpr uint64_t min_producer_credit = 20;
    // An open relayed producer link's place in the budget: it counts while
    // held. Move-only; a default-built one counts nothing.
    class producer_share {
      public:
        producer_share() = default;
        explicit producer_share(relay_hub& hub) : hub_(&hub) { hub_->producers_.fetch_add(1); }
        producer_share(producer_share&& o) noexcept : hub_(std::exchange(o.hub_, nullptr)) {}
        producer_share& operator=(producer_share&& o) noexcept {
            if (this != &o) {
                release();
                hub_ = std::exchange(o.hub_, nullptr);
            }
            return *this;
        }
        producer_share(const producer_share&) = delete;
        producer_share& operator=(const producer_share&) = delete;
        ~producer_share() { release(); }
        void release() {
            if (hub_ != nullptr) hub_->producers_.fetch_sub(1);
            hub_ = nullptr;
        }

      private:
        relay_hub* hub_ = nullptr;
    };
    // The credit one relayed producer may hold now: an even share of the
    // budget, at least min_producer_credit. Any thread.
    uint64_t producer_window() const {
        const uint64_t n = std::max<uint64_t>(1, producers_.load(std::memory_order_relaxed));
        return std::max(min_producer_credit, producer_credit_budget / n);
    }

  private:
    struct pool {
        std::shared_ptr<relay::mailbox> slots[connections_per_peer];
    };
    connect_fn connect_;
    std::mutex mu_;
    std::map<std::string, pool> pools_; // by host:port
    std::atomic<uint64_t> producers_{0}; // open relayed producer links (producer_share)
};

} // namespace wharf::server
