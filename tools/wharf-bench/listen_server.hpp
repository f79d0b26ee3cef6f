#pragma once
// listen_server: `receive --listen HOST:PORT`. Instead of connecting to a
// broker, wharf-bench accepts connections and takes the sending links that
// peers (another wharf-bench in send mode) attach: each incoming link is
// handed to the next receiver_client not yet in use (there are --connections
// x --links of them), which then grants credit and counts as in a normal
// receive run. A link beyond those, or a receiving link, is refused. This is
// the ceiling: sender to receiver with no broker between.
//
// Owned by bench_clients; listen() runs on a container thread
// (on_container_start), the accepted connections' callbacks on container
// threads; peers_gone() may be called from any thread.

#include "tools/wharf-bench/link_clients.hpp"

#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>

#include <atomic>
#include <mutex>
#include <vector>

namespace wharf::bench {

class listen_server : public guarded_handler {
public:
    listen_server(run_control& run, std::vector<receiver_client*> receivers);

    void listen(proton::container& c);
    // True once a link has been attached and every connection that was
    // accepted has ended (the senders are done and gone).
    bool peers_gone() const;
    void set_closing() { closing_.store(true, std::memory_order_relaxed); }

private:
    // The listener's own callbacks (a separate object: listen_handler's
    // on_error has another signature than messaging_handler's).
    class acceptor : public proton::listen_handler {
    public:
        explicit acceptor(listen_server& server) : server_(server) {}
        void on_open(proton::listener& l) override;
        proton::connection_options on_accept(proton::listener& l) override;
        void on_error(proton::listener& l, const std::string& what) override;

    private:
        listen_server& server_;
    };

    bool closing() const override { return closing_.load(std::memory_order_relaxed); }
    void on_receiver_open(proton::receiver& r) override;
    void on_sender_open(proton::sender& s) override;
    void on_transport_error(proton::transport& t) override;
    void on_transport_close(proton::transport& t) override;

    acceptor acceptor_{*this};
    std::mutex mutex_;  // guards next_: accepted connections may run on different threads
    std::vector<receiver_client*> receivers_;
    std::size_t next_ = 0;
    std::atomic<bool> attached_{false};
    std::atomic<int> accepted_{0};
    std::atomic<int> ended_{0};
    std::atomic<bool> closing_{false};
};

} // namespace wharf::bench
