#pragma once
// connection_base: what the server's event loop needs of any connection it
// runs: a client's (amqp_connection) or one this node opened to another node
// (peer_connection, for relayed links). The pn_connection_t's context is a
// connection_base*.

#include <proton/connection.h>
#include <proton/event.h>
#include <proton/proactor.h>

#include <atomic>

namespace wharf::server {

// Sooner ticks: a connection that waits for something time-based (see
// credit_pool) asks the server to tick every few milliseconds instead of
// once a second, for as long as it keeps asking. Any thread.
class tick_requests {
  public:
    static constexpr pn_millis_t fast_ms = 10;
    explicit tick_requests(pn_proactor_t* p) : proactor_(p) {}
    void want() {
        if (!wanted_.exchange(true, std::memory_order_relaxed)) pn_proactor_set_timeout(proactor_, fast_ms);
    }
    // The server, at a tick: whether anyone asked since the last.
    bool take() { return wanted_.exchange(false, std::memory_order_relaxed); }
    // Asked since take(): its sooner timeout may have been overwritten.
    bool wanted() const { return wanted_.load(std::memory_order_relaxed); }

  private:
    pn_proactor_t* proactor_;
    std::atomic<bool> wanted_{false};
};

class connection_base {
  public:
    virtual ~connection_base() = default;
    virtual void on_event(pn_event_t* e) = 0;
    // After the last event of a batch.
    virtual void end_batch() = 0;
    // The transport closed: the server may free the connection.
    virtual bool finished() const = 0;
    virtual pn_connection_t* pn() const = 0;
    // Any thread: close with amqp:connection:forced.
    virtual void request_shutdown() = 0;
    // Any thread, at the server's tick (once a second, every 10 ms while
    // some connection asks: tick_requests), under its connection table lock.
    virtual void on_tick() {}

    static connection_base* of(pn_connection_t* c) {
        return static_cast<connection_base*>(pn_connection_get_context(c));
    }

  protected:
    void bind_to(pn_connection_t* c) { pn_connection_set_context(c, static_cast<connection_base*>(this)); }
};

} // namespace wharf::server
