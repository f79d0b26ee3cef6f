#pragma once
// Test side of the client library: a cluster_client on a Proton container
// that runs on a thread of its own (client_app), and a link_handler that
// records what the application sees (recorded_link), with blocking waits
// for the test's thread. Every wait has a deadline; nothing sleeps.
//
// recorded_link's Proton objects are touched only in its callbacks and in
// work posted through its link_ref (the link's thread); the test thread
// reads copies under the mutex.

#include "client/cluster_client.hpp"

#include <proton/container.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace wharf::client::test {

constexpr std::chrono::milliseconds wait_limit{20000};

class recorded_link : public link_handler {
  public:
    void set_ref(link_ref r);
    link_ref ref();

    // Waits until the link has opened `count` times (a later redirect opens it again).
    bool wait_open(int count = 1);
    std::optional<link_failure> wait_failure();
    bool wait_closed(); // on_sender_close / on_receiver_close
    bool wait_until(const std::function<bool()>& pred); // pred runs under the mutex

    // "sender_open@n2", "receiver_error:amqp:not-found", "redirect:n1->127.0.0.1:P", ...
    std::vector<std::string> events();
    std::optional<link_failure> failure();
    std::string node();              // the peer's container id at the last open
    std::vector<int> credit_at_open(); // receiver: its credit at each open
    int redirect_count();

    // Sender: queues bodies and sends them as credit allows; released and
    // in-flight-at-redirect ones are sent again.
    void send(const std::vector<std::string>& bodies);
    bool wait_accepted(size_t n);
    size_t accepted();
    size_t released();

    // Receiver: grants n credits (for credit_window(0) receivers).
    void grant(int n);
    bool wait_received(size_t n);
    std::vector<std::string> received();

  private:
    void note(std::string e);
    void pump(); // link thread

    void on_sender_open(proton::sender& s) override;
    void on_sendable(proton::sender& s) override;
    void on_sender_error(proton::sender& s) override;
    void on_sender_close(proton::sender& s) override;
    void on_sender_detach(proton::sender& s) override;
    void on_tracker_accept(proton::tracker& t) override;
    void on_tracker_reject(proton::tracker& t) override;
    void on_tracker_release(proton::tracker& t) override;
    void on_receiver_open(proton::receiver& r) override;
    void on_message(proton::delivery& d, proton::message& m) override;
    void on_receiver_error(proton::receiver& r) override;
    void on_receiver_close(proton::receiver& r) override;
    void on_receiver_detach(proton::receiver& r) override;
    void on_error(const proton::error_condition& e) override;
    void on_link_failure(const link_failure& f) override;
    void on_redirect(const redirect_info& r) override;

    std::mutex mu_;
    std::condition_variable cv_;
    link_ref ref_;
    std::vector<std::string> events_;
    std::optional<link_failure> failure_;
    int opens_ = 0;
    bool closed_ = false;
    std::string node_;
    std::vector<int> credit_at_open_;
    int redirects_ = 0;
    // sender
    std::deque<std::string> to_send_;
    size_t accepted_ = 0;
    size_t released_ = 0;
    // receiver
    std::vector<std::string> received_;

    // link thread only
    proton::sender sender_;
    proton::receiver receiver_;
    std::map<proton::tracker, std::string> in_flight_;
};

// A cluster_client whose container runs on its own thread for the test's life.
// Declare the recorded_links it serves before it: handlers must outlive it.
class client_app {
  public:
    explicit client_app(client_options o = {});
    ~client_app();
    client_app(const client_app&) = delete;
    client_app& operator=(const client_app&) = delete;

    cluster_client& client() { return *client_; }

  private:
    proton::container container_;
    std::unique_ptr<cluster_client> client_;
    std::thread thread_;
};

} // namespace wharf::client::test
