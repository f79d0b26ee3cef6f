#pragma once
// relay_hub: the node's pool of connections to other nodes for relayed
// links — a few per peer node (links are spread over them), opened on first
// need, forgotten when they end (the next relayed attach opens a new one).
//
// Threads: peer() is called on client connections' threads; connections are
// opened through the server (its proactor and connection table). Thread-safe.

#include "broker/server/relay_protocol.hpp"

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

    // A live connection to the node at host:port, for one more link.
    std::shared_ptr<relay::mailbox> peer(const std::string& node, const std::string& host, uint16_t port);
    // A peer connection ended: do not hand it out again.
    void lost(const relay::mailbox* m);

  private:
    struct pool {
        std::vector<std::shared_ptr<relay::mailbox>> conns;
        size_t next = 0;
    };
    connect_fn connect_;
    std::mutex mu_;
    std::map<std::string, pool> pools_; // by host:port
};

} // namespace wharf::server
