#pragma once
// scripted_peer: an AMQP server (Proton C++) that stands in for the receiving
// node when a test needs outcomes or link endings wharfd does not give on
// demand. It accepts connections (SASL ANONYMOUS or none), grants credit on
// every incoming link and settles each message as its string body says:
//
//   "accept"  accepted            "release"  released
//   "modify"  modified (delivery-failed, undeliverable-here)
//   "hold"    left unsettled
//   "detach"  left unsettled, and the link is closed with
//             amqp:internal-error "told to detach"
//
// It records what it saw: the client's container id, each link's name,
// target, properties and settle modes, and the bodies in arrival order.
// Runs a container on its own thread; read the record through snapshot().

#include <proton/container.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wharf::internode::test {

struct peer_link_seen {
    std::string name;
    std::string target;
    std::map<std::string, std::string> properties; // string values only
    bool sender_unsettled = false;                  // snd-settle-mode unsettled
    bool receiver_settles_first = false;            // rcv-settle-mode first
};

struct peer_record {
    std::string container_id;        // of the last connection opened
    std::vector<peer_link_seen> links;
    std::vector<std::string> bodies; // every message, in arrival order
    size_t presettled = 0;           // messages that arrived already settled
    std::string error;               // anything the peer's handler saw go wrong
};

class scripted_peer {
  public:
    scripted_peer(); // listens on 127.0.0.1, OS-chosen port (check port() != 0)
    ~scripted_peer();
    scripted_peer(const scripted_peer&) = delete;
    scripted_peer& operator=(const scripted_peer&) = delete;

    uint16_t port() const { return port_; }
    peer_record snapshot();
    // Waits (bounded) until pred(record) holds.
    bool wait_until(const std::function<bool(const peer_record&)>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));

  private:
    class handler;
    friend class handler;

    std::mutex mu_;
    std::condition_variable cv_;
    peer_record record_;
    bool listening_ = false;
    uint16_t port_ = 0;
    std::unique_ptr<handler> handler_;
    std::unique_ptr<proton::container> container_;
    std::thread thread_;
};

} // namespace wharf::internode::test
