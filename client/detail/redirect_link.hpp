#pragma once
// redirect_link: one link the application opened through cluster_client.
// It is the Proton handler of whichever Proton link currently stands for
// it: it passes every event on to the application's link_handler, except
// the attach and detach of a redirect, which it follows by moving to the
// connection the redirect names and attaching again there.
//
// Owned by client_state (shared_ptr, kept until the client is destroyed:
// Proton holds a pointer to it). Its Proton state lives on the thread of the
// connection it is on; moving to another connection hands it over through
// that connection's work queue (node_connection::submit), the last thing the
// old thread does with it. request_close(), post() and the accessors may be
// called from any thread (mu_ guards node_ and closed_).

#include "client/link_handler.hpp"
#include "client/redirect_target.hpp"

#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/work_queue.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct pn_link_t;

namespace wharf::client::detail {

class node_connection;
struct client_state;

class redirect_link final : public proton::messaging_handler,
                            public std::enable_shared_from_this<redirect_link> {
  public:
    redirect_link(const std::shared_ptr<client_state>& client, bool sender, std::string address, link_handler& app,
                  proton::sender_options sopts, proton::receiver_options ropts);

    // Any thread.
    void start(const endpoint& where);
    void request_close();
    bool post(proton::work f);
    std::string node_address() const;
    int redirects() const { return redirects_.load(std::memory_order_relaxed); }

    // On the thread of the connection the link is on (node_connection calls these).
    void close_local();
    void connection_lost(const proton::error_condition& why);

  private:
    using clock = std::chrono::steady_clock;

    void move_to(const endpoint& where, const std::string& vhost, const std::string& redirected_by);
    void attach(const std::shared_ptr<node_connection>& node, proton::connection& c);
    void unreachable(const std::string& target, const std::string& redirected_by,
                     const proton::error_condition& why);
    void attach_timed_out(std::uint64_t attempt, const std::string& target); // the timer's thread
    void attach_unanswered(std::uint64_t attempt, const std::string& target); // the connection's thread
    std::string timeout_text() const;
    bool dispatch(const std::shared_ptr<proton::work>& f);

    bool is_current(const proton::link& l) const;
    bool will_follow(const proton::link& l) const;
    void opened(const proton::link& l);
    void ended(proton::link& l, bool closing);
    void follow(proton::link& l);
    void hand_back_unsettled();
    void leave_node();
    void fail(const char* name, const std::string& description);
    void report(const proton::error_condition& e);
    bool mark_closed(); // true if it was not closed yet

    // Proton events of the current link.
    void on_sender_open(proton::sender& s) override;
    void on_sendable(proton::sender& s) override;
    void on_sender_drain_start(proton::sender& s) override;
    void on_sender_error(proton::sender& s) override;
    void on_sender_close(proton::sender& s) override;
    void on_sender_detach(proton::sender& s) override;
    void on_tracker_accept(proton::tracker& t) override;
    void on_tracker_reject(proton::tracker& t) override;
    void on_tracker_release(proton::tracker& t) override;
    void on_tracker_settle(proton::tracker& t) override;
    void on_receiver_open(proton::receiver& r) override;
    void on_message(proton::delivery& d, proton::message& m) override;
    void on_delivery_settle(proton::delivery& d) override;
    void on_receiver_drain_finish(proton::receiver& r) override;
    void on_receiver_error(proton::receiver& r) override;
    void on_receiver_close(proton::receiver& r) override;
    void on_receiver_detach(proton::receiver& r) override;
    void on_error(const proton::error_condition& e) override;

    const std::weak_ptr<client_state> client_;
    const bool sender_role_;
    const std::string opened_address_; // as the application asked
    link_handler& app_;
    proton::sender_options sopts_;
    proton::receiver_options ropts_;
    const int max_redirects_;
    const std::chrono::milliseconds count_reset_;
    const std::chrono::milliseconds attach_timeout_;

    mutable std::mutex mu_;
    std::shared_ptr<node_connection> node_; // where it is, or is going
    bool closed_ = false;                   // by the application, or over
    std::uint64_t attempt_ = 0;             // counts move_to()s: a time-out is for one of them

    std::atomic<int> redirects_{0};
    std::atomic<pn_link_t*> current_{nullptr}; // the Proton link standing for it

    // The current connection's thread only.
    proton::sender sender_;
    proton::receiver receiver_;
    bool on_node_ = false;       // node_->link_arrived() was called
    std::string address_;        // where to attach (changes with redirects)
    bool redirected_ = false;    // address_ came from a redirect
    bool open_ = false;          // the current Proton link is open (not refused)
    clock::time_point opened_at_{};
    std::vector<std::string> chain_; // the nodes that redirected this attach
    int saved_credit_ = 0;           // receiver: credit when it was redirected
    bool saved_drain_ = false;
};

} // namespace wharf::client::detail
