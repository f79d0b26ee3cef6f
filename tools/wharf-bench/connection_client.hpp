#pragma once
// connection_client: one benchmark connection and the link clients on it.
// Owned by main (bench_clients), created before the container runs and
// destroyed after it has stopped. Proton callbacks run on the connection's
// thread; post(), request_close() and poke_senders() may be called from any
// thread and hop onto that thread through the connection's work_queue.

#include "tools/wharf-bench/link_clients.hpp"

#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/work_queue.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace wharf::bench {

class connection_client : public guarded_handler {
public:
    connection_client(run_control& run, int index);

    // Called once on a container thread (on_container_start).
    void connect(proton::container& c);

    // Runs `f` on this connection's thread. False when the connection is gone
    // (never opened, or its loop has ended): `f` will not run.
    bool post(proton::work f);
    // False when the connection is not open (never opened, or already gone).
    bool request_close();
    void poke_senders();

    bool closing() const override { return closing_.load(std::memory_order_relaxed); }
    bool transport_closed() const { return transport_closed_.load(std::memory_order_acquire); }
    int index() const { return index_; }

    std::vector<std::unique_ptr<sender_client>>& senders() { return senders_; }
    std::vector<std::unique_ptr<receiver_client>>& receivers() { return receivers_; }

private:
    void on_connection_open(proton::connection& c) override;
    void on_connection_close(proton::connection& c) override;
    void on_transport_close(proton::transport& t) override;
    void close_now();

    const int index_;
    proton::connection connection_;
    std::mutex wq_mutex_;
    proton::work_queue* work_queue_ = nullptr;  // set while the connection is alive
    std::atomic<bool> closing_{false};
    std::atomic<bool> transport_closed_{false};
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

private:
    bool closing() const override { return false; }
    void on_container_start(proton::container& c) override;

    std::vector<std::unique_ptr<connection_client>> connections_;
    std::vector<sender_client*> senders_by_link_;  // index = global link number
};

} // namespace wharf::bench
