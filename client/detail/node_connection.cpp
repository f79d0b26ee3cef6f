#include "client/detail/node_connection.hpp"

#include "client/detail/redirect_link.hpp"
#include "client/link_handler.hpp"

#include <proton/session.hpp>
#include <proton/transport.hpp>

#include <algorithm>
#include <exception>

namespace wharf::client::detail {

node_connection::node_connection(endpoint where, proton::connection_options opts)
    : where_(std::move(where)), where_key_(where_.key()), opts_(std::move(opts)) {}

void node_connection::connect(proton::container& c) {
    try {
        c.connect(where_.url(), proton::connection_options(opts_).handler(*this));
    } catch (const std::exception& e) {
        // Nothing will ever run on this connection: fail its work here.
        end(proton::error_condition("proton:io", "cannot connect to " + where_key_ + ": " + e.what()));
    }
}

bool node_connection::submit(node_task t) {
    std::lock_guard lock(mu_);
    if (state_ == state::ended) return false;
    pending_.push_back(std::move(t));
    if (state_ == state::open && !wake_posted_) {
        // If the loop has already ended, end() is on its way and fails the task.
        wake_posted_ = wq_->add([self = shared_from_this()] { self->run_pending(); });
    }
    return true;
}

bool node_connection::close() {
    std::lock_guard lock(mu_);
    if (state_ == state::ended) return false;
    close_requested_ = true;
    if (state_ == state::open) {
        pending_.push_back({[self = shared_from_this()](proton::connection&) { self->close_now(); },
                            [](const proton::error_condition&) {}});
        if (!wake_posted_) wake_posted_ = wq_->add([self = shared_from_this()] { self->run_pending(); });
    }
    return true; // still connecting: on_connection_open closes it
}

bool node_connection::give_up_connecting(const proton::error_condition& why) {
    std::deque<node_task> failed;
    {
        std::lock_guard lock(mu_);
        if (state_ != state::connecting) return false;
        state_ = state::ended;
        failed.swap(pending_);
    }
    for (auto& t : failed) t.fail(why);
    return true;
}

std::string node_connection::describe() const {
    std::lock_guard lock(mu_);
    return node_id_.empty() ? where_key_ : node_id_ + " (" + where_key_ + ")";
}

std::string node_connection::node_id() const {
    std::lock_guard lock(mu_);
    return node_id_;
}

bool node_connection::is_open() const {
    std::lock_guard lock(mu_);
    return state_ == state::open;
}

bool node_connection::ended() const {
    std::lock_guard lock(mu_);
    return state_ == state::ended;
}

void node_connection::link_arrived(redirect_link* l) { links_.push_back(l); }

void node_connection::link_left(redirect_link* l) { std::erase(links_, l); }

void node_connection::run_pending() {
    for (;;) {
        std::deque<node_task> batch;
        {
            std::lock_guard lock(mu_);
            wake_posted_ = false;
            if (state_ != state::open || pending_.empty()) return;
            batch.swap(pending_);
        }
        for (auto& t : batch) t.run(conn_);
    }
}

void node_connection::close_now() {
    const std::vector<redirect_link*> here = links_;
    for (redirect_link* l : here) l->close_local();
    if (conn_ && conn_.active()) conn_.close();
}

void node_connection::end(const proton::error_condition& why) {
    std::deque<node_task> failed;
    bool requested = false;
    {
        std::lock_guard lock(mu_);
        if (state_ == state::ended) return;
        state_ = state::ended;
        wq_ = nullptr;
        failed.swap(pending_);
        requested = close_requested_;
    }
    proton::error_condition reason = why;
    if (reason.empty() && !requested)
        reason = proton::error_condition(connection_lost, "the connection to " + describe() + " ended");
    for (auto& t : failed) t.fail(reason);
    const std::vector<redirect_link*> here = std::move(links_);
    links_.clear();
    for (redirect_link* l : here) l->connection_lost(reason);
    conn_ = proton::connection(); // let Proton free it; nothing runs here any more
}

void node_connection::on_connection_open(proton::connection& c) {
    bool close = false;
    {
        std::lock_guard lock(mu_);
        if (state_ == state::ended) { // given up before it opened
            c.close();
            return;
        }
        conn_ = c;
        state_ = state::open;
        wq_ = &c.work_queue();
        node_id_ = c.container_id();
        close = close_requested_;
    }
    run_pending();
    if (close) close_now();
}

void node_connection::on_connection_error(proton::connection& c) {
    if (first_error_.empty()) first_error_ = owned_condition(c.error());
}

void node_connection::on_connection_close(proton::connection&) {}

void node_connection::on_session_error(proton::session& s) {
    // Every link of the client is on the default session: without it the
    // connection is of no use.
    if (first_error_.empty()) first_error_ = owned_condition(s.error());
    if (conn_ && conn_.active()) conn_.close();
}

void node_connection::on_transport_error(proton::transport& t) {
    if (first_error_.empty()) first_error_ = owned_condition(t.error());
}

void node_connection::on_transport_close(proton::transport&) { end(first_error_); }

void node_connection::on_error(const proton::error_condition& e) {
    if (first_error_.empty()) first_error_ = owned_condition(e);
}

} // namespace wharf::client::detail
