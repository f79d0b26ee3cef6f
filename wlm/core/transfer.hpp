#pragma once
// transfer: hands one queue's messages from this node to another, at least
// once. A tap takes the messages from the local queue in order; a forwarder
// (one AMQP connection to the other node, shared by the transfers going
// there) sends them byte for byte on a link to the same queue name; a
// message leaves this node only when the other node accepted it (stored, if
// durable). A message the other node did not accept goes back to the queue
// and the transfer pauses before trying again, unless retrying cannot help:
// then refused_for_good() says why and the caller gives up (abandons the
// move).
//
// Threads: created, topped up and destroyed on the WLM worker thread; the
// tap's callback runs on the queue engine's thread and the forwarder's
// outcomes on its own thread. Destroying a transfer returns whatever is
// still unsettled to the local queue.

#include "internode/forwarder.hpp"
#include "plugins/api/plugin.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace wharf::wlm {

class transfer {
  public:
    static constexpr uint64_t window = 256;  // messages tapped but not yet settled

    transfer(plugins::node_context& ctx, std::string queue, std::string target,
             std::shared_ptr<internode::forwarder> fwd);
    ~transfer();
    transfer(const transfer&) = delete;
    transfer& operator=(const transfer&) = delete;

    // Grants the tap credit up to the window, unless pausing after a failure.
    void top_up();
    // Taken from the queue and not yet settled.
    uint64_t in_flight() const;
    uint64_t moved() const { return state_->moved.load(); }
    const std::string& target() const { return target_; }
    // The connection to the target ended: this transfer cannot go on.
    bool broken() const { return fwd_->broken(); }
    // Why retrying is pointless, if it is: the target refused a message
    // with amqp:link:message-size-exceeded (the message will not shrink),
    // or it has refused every message for refusal_limit with none accepted
    // meanwhile. The target's condition, e.g. "node n2 refused a message
    // (amqp:link:message-size-exceeded: ...)". Empty while worth retrying.
    std::string refused_for_good() const;

    static constexpr std::chrono::milliseconds refusal_limit{30000};

  private:
    struct shared {
        std::mutex mu;
        plugins::queue_tap* tap = nullptr;  // null once the transfer is gone
        std::atomic<uint64_t> taken{0}, settled{0}, moved{0};
        std::atomic<int64_t> pause_until_ms{0};
        std::string last_failure;     // under mu
        int64_t refusing_since_ms = 0; // under mu: first refusal since the last acceptance (0: none)
        bool hopeless = false;         // under mu: a refusal retrying cannot cure
    };

    const std::string queue_;
    const std::string target_;
    std::shared_ptr<internode::forwarder> fwd_;
    std::shared_ptr<shared> state_;
    std::unique_ptr<plugins::queue_tap> tap_;
    uint64_t granted_ = 0;
};

} // namespace wharf::wlm
