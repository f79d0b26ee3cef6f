#pragma once
// server: the node's network side. Owns the Proton proactor, the listeners,
// the worker threads and the table of live connections; feeds connection
// events to amqp_connection and ticks the queue engine once a second.
//
// Threads: run() starts `threads` proactor workers and returns when they
// have all stopped. Proton hands each connection's event batch to one worker
// at a time. stop() is thread-safe (the signal thread calls it).

#include "broker/common/result.hpp"
#include "broker/config/node_config.hpp"
#include "broker/engine/queue_engine.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/busy_poll.hpp"
#include "broker/server/relay_hub.hpp"

#include <proton/listener.h>
#include <proton/proactor.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::server {

class server {
  public:
    // on_listening is called once per listener with "HOST:PORT" as bound
    // (the real port when 0 was asked for).
    server(const config::node_config& cfg, engine::queue_engine& engine,
           std::function<void(const std::string&)> on_listening);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    // Runs until stop() and every connection has closed. Returns 0, or 1 when
    // a listener failed (the reason is logged).
    int run();
    // Close listeners and connections (amqp:connection:forced); any thread.
    void stop();

    size_t connection_count() const { return connection_count_.load(); }
    const std::atomic<size_t>& connections() const { return connection_count_; }
    // Before run(): the plugins' resolvers, asked in order on every attach.
    void set_resolvers(std::vector<plugins::address_resolver*> r) { settings_.resolvers = std::move(r); }
    // Any thread: management's view of the client connections.
    std::vector<connection_info> connection_infos();
    // Any thread: close client connection `id` (connection_info::id) with
    // amqp:connection:forced; false if there is none.
    bool close_connection(uint64_t id, const std::string& why);
    // Before run(): the $management node (none: attaches to it are ordinary).
    void set_management(management::management_service* m) { settings_.management = m; }

  private:
    struct listener_ctx {
        config::listener_config cfg;
        pn_listener_t* listener = nullptr;
        bool closed = false;
    };

    void worker();
    struct poll_state { // one worker's (next_batch)
        poll_window window;
        uint64_t wakes_at_read = 0; // connection_wakes() when Proton's ready list was surely read
        std::chrono::steady_clock::time_point list_read{}; // when the worker last waited
    };
    pn_event_batch_t* next_batch(poll_state& ps, int last_events);
    bool handle(pn_event_t* e, connection_base*& conn);
    void accept(listener_ctx& lc);
    // A connection to another node, for relayed links (relay_hub calls it).
    std::shared_ptr<relay::mailbox> connect_peer(const std::string& node, const std::string& host, uint16_t port);
    void finish(connection_base* conn);
    void finish_all_stopped();

    const config::node_config& cfg_;
    engine::queue_engine& engine_;
    std::function<void(const std::string&)> on_listening_;
    connection_settings settings_;
    pn_proactor_t* proactor_;
    std::vector<std::unique_ptr<listener_ctx>> listeners_;
    std::vector<std::string> opened_addrs_; // under table_mu_: listeners open so far
    std::atomic<uint64_t> link_ids_{0};
    std::atomic<size_t> connection_count_{0};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> done_{false};
    std::atomic<int> failed_{0};
    unsigned threads_;

    std::mutex table_mu_; // guards connections_ (open/close only, not the message path)
    std::unordered_map<pn_connection_t*, std::unique_ptr<connection_base>> connections_;
    relay_hub relays_;
    credit_budget producer_budget_; // every producer link of this node (settings_.producers)
    tick_requests ticks_;           // connections asking for sooner ticks (settings_.ticks)
    std::chrono::steady_clock::time_point engine_ticked_; // the last cmd_tick (timeout handler only)
};

} // namespace wharf::server
