#pragma once
// connection_client: one benchmark connection and the link clients on it.
// The links are opened through a wharf::client::cluster_client of its own,
// which follows link redirects: a link refused with amqp:link:redirect is
// attached again at the node the redirect names, over the client's
// connection to that node (one per node, opened on demand). So one
// connection_client is one connection to --url plus, in a cluster, one to
// each node its queues live on; all of them carry the container id PREFIX-i.
//
// Owned by main (bench_clients), created before the container runs and
// destroyed after it has stopped. Link callbacks run on the thread of the
// connection each link is on; request_close() and poke_senders() may be
// called from any thread.

#include "tools/wharf-bench/link_clients.hpp"
#include "tools/wharf-bench/listen_server.hpp"

#include "client/cluster_client.hpp"

#include <proton/container.hpp>

#include <atomic>
#include <memory>
#include <vector>

namespace wharf::bench {

class connection_client : public guarded_handler {
public:
    connection_client(run_control& run, int index);

    // Called once on a container thread (on_container_start).
    void connect(proton::container& c);

    // Detaches every link and closes the connections. False when none was
    // up any more (never opened, or already gone).
    bool request_close();
    void poke_senders();

    bool closing() const override { return closing_.load(std::memory_order_relaxed); }
    int index() const { return index_; }

    std::vector<std::unique_ptr<sender_client>>& senders() { return senders_; }
    std::vector<std::unique_ptr<receiver_client>>& receivers() { return receivers_; }

private:
    const int index_;
    std::unique_ptr<wharf::client::cluster_client> client_;  // set in connect()
    std::atomic<bool> connected_{false};
    std::atomic<bool> closing_{false};
    std::vector<std::unique_ptr<sender_client>> senders_;
    std::vector<std::unique_ptr<receiver_client>> receivers_;
};

// All connections of a run, and the container-level handler that connects them.
class bench_clients : public guarded_handler {
public:
    explicit bench_clients(run_control& run);

    std::vector<std::unique_ptr<connection_client>>& connections() { return connections_; }
    // Returns how many connections were open and will now close.
    int request_close_all();
    void poke_all_senders();
    // receive --listen: the server that takes peers' links (nullptr otherwise).
    listen_server* listener() { return listener_.get(); }
    // The first receiver attach (0: none yet): a listening run's clock starts there.
    std::uint64_t first_attach_ns() const;

private:
    bool closing() const override { return false; }
    void on_container_start(proton::container& c) override;

    std::vector<std::unique_ptr<connection_client>> connections_;
    std::vector<sender_client*> senders_by_link_;  // index = global link number
    std::unique_ptr<listen_server> listener_;
};

} // namespace wharf::bench
