#pragma once
// node_connection: one AMQP connection a cluster_client opened, to one
// host:port, and the work waiting to run on it.
//
// Owned by client_state (shared_ptr, kept until the client is destroyed:
// Proton holds a pointer to it as the connection's handler). Its Proton
// callbacks run on the connection's thread; submit(), close() and the
// accessors may be called from any thread (state under mu_). Work always
// runs on the connection's thread — opening a link on connection B from a
// callback of connection A would not be written out until B wakes up.

#include "client/redirect_target.hpp"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/error_condition.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/work_queue.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wharf::client::detail {

class redirect_link;

// Work for a connection: `run` once it is open, or `fail` if it ends (or
// never opens) first. Either runs on the connection's thread, exactly once.
struct node_task {
    std::function<void(proton::connection&)> run;
    std::function<void(const proton::error_condition&)> fail;
};

class node_connection final : public proton::messaging_handler,
                              public std::enable_shared_from_this<node_connection> {
  public:
    node_connection(endpoint where, proton::connection_options opts);

    // Starts connecting. Called once, by whoever created this object.
    void connect(proton::container& c);
    // Queues t. False (t dropped, neither function called) once the
    // connection has ended.
    bool submit(node_task t);
    // Detaches the links on it and closes it. False if it had already ended.
    bool close();
    // If it has not opened yet: ends it, failing its work with `why`, and
    // true. Any thread (it has no thread before it opens). Should it open
    // later, it is closed at once.
    bool give_up_connecting(const proton::error_condition& why);

    const std::string& key() const { return where_key_; }
    const endpoint& where() const { return where_; }
    // "n2 (127.0.0.1:5673)" once open, else "127.0.0.1:5673".
    std::string describe() const;
    std::string node_id() const;
    bool is_open() const;
    bool ended() const;

    // Connection thread only: the links whose Proton link is on this connection.
    void link_arrived(redirect_link* l);
    void link_left(redirect_link* l);

  private:
    enum class state { connecting, open, ended };

    void run_pending();                               // connection thread
    void end(const proton::error_condition& why);     // connection thread
    void close_now();                                 // connection thread

    void on_connection_open(proton::connection& c) override;
    void on_connection_error(proton::connection& c) override;
    void on_connection_close(proton::connection& c) override;
    void on_session_error(proton::session& s) override;
    void on_transport_error(proton::transport& t) override;
    void on_transport_close(proton::transport& t) override;
    void on_error(const proton::error_condition& e) override;

    const endpoint where_;
    const std::string where_key_;
    proton::connection_options opts_;

    mutable std::mutex mu_;
    state state_ = state::connecting;
    std::deque<node_task> pending_;
    proton::work_queue* wq_ = nullptr; // while open
    bool wake_posted_ = false;
    bool close_requested_ = false;
    std::string node_id_;

    // connection thread only
    proton::connection conn_;
    std::vector<redirect_link*> links_;
    proton::error_condition first_error_;
};

} // namespace wharf::client::detail
