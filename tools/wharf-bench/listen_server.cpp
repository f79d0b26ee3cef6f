#include "tools/wharf-bench/listen_server.hpp"

#include <proton/error_condition.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/target.hpp>
#include <proton/transport.hpp>

#include <cstdio>

namespace wharf::bench {

listen_server::listen_server(run_control& run, std::vector<receiver_client*> receivers)
    : guarded_handler(run), receivers_(std::move(receivers)) {}

void listen_server::listen(proton::container& c) { c.listen(run_.options().listen, acceptor_); }

bool listen_server::peers_gone() const {
    return attached_.load(std::memory_order_acquire) &&
           ended_.load(std::memory_order_acquire) == accepted_.load(std::memory_order_acquire);
}

// Printed even with --quiet: a script started with --listen HOST:0 reads the port here.
void listen_server::acceptor::on_open(proton::listener& l) {
    std::fprintf(stderr, "wharf-bench: listening on port %d\n", l.port());
}

proton::connection_options listen_server::acceptor::on_accept(proton::listener&) {
    server_.accepted_.fetch_add(1, std::memory_order_acq_rel);
    return proton::connection_options().handler(server_);
}

void listen_server::acceptor::on_error(proton::listener&, const std::string& what) {
    server_.run_.fail("listen on " + server_.run_.options().listen + ": " + what);
}

void listen_server::on_receiver_open(proton::receiver& r) {
    receiver_client* next = nullptr;
    {
        std::lock_guard lock(mutex_);
        if (next_ < receivers_.size()) next = receivers_[next_++];
    }
    if (next == nullptr) {
        r.close(proton::error_condition("amqp:resource-limit-exceeded",
                                        "wharf-bench --listen takes --connections x --links links"));
        return;
    }
    next->accept_incoming(r);
    attached_.store(true, std::memory_order_release);
}

void listen_server::on_sender_open(proton::sender& s) {
    s.close(proton::error_condition("amqp:not-implemented", "wharf-bench --listen only receives"));
}

// A peer that went away without closing (or a port probe) is not this
// run's failure: the sender reports its own errors.
void listen_server::on_transport_error(proton::transport&) {}

void listen_server::on_transport_close(proton::transport&) { ended_.fetch_add(1, std::memory_order_acq_rel); }

} // namespace wharf::bench
