#pragma once
// mini_broker: a tiny AMQP broker for tests (Proton C++), with faults a
// real node does not make on demand. Producers' messages go into a queue
// per address and out to that address's consumers (pre-settled when the
// consumer asked for it); a consumer may ask for a dynamic source (it gets
// "tmp-N"). Faults (mini_broker_options): drop every n-th message (a
// pre-settled one is simply lost), release the first message (not kept),
// deliver the first message it keeps twice, reject every message sent to
// one address with a condition, or never answer attaches to one address.
// Its container runs on a thread of its own; port() may be called from the
// test's thread.

#include <proton/container.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct pn_link_t;

namespace wharf::client::test {

struct mini_broker_options {
    int drop_every = 0;          // > 0: every n-th message received is dropped
    bool release_first = false;    // the first message is released to its producer, not kept
    bool duplicate_first = false;  // the first message kept is delivered twice
    std::string reject_address;  // messages to this address are rejected with reject_condition
    std::string reject_condition = "amqp:not-allowed";
    std::string reject_description = "refused by mini_broker";
    std::string mute_address;    // attaches to this address are never answered
};

class mini_broker : public proton::messaging_handler, public proton::listen_handler {
  public:
    explicit mini_broker(mini_broker_options o = {});
    ~mini_broker();
    mini_broker(const mini_broker&) = delete;
    mini_broker& operator=(const mini_broker&) = delete;

    uint16_t port() const { return port_.load(); } // 0 if it could not listen
    std::string url() const { return "127.0.0.1:" + std::to_string(port()); }
    int dropped() const { return dropped_.load(); }

  private:
    void dispatch(const std::string& address); // container thread
    bool muted(pn_link_t* c) const;            // an attach it leaves unanswered

    void on_container_start(proton::container& c) override;
    void on_sender_open(proton::sender& s) override;
    void on_receiver_open(proton::receiver& r) override;
    void on_sendable(proton::sender& s) override;
    void on_message(proton::delivery& d, proton::message& m) override;
    void on_sender_close(proton::sender& s) override;
    void on_transport_close(proton::transport& t) override;
    void on_transport_error(proton::transport&) override {}
    void on_connection_error(proton::connection&) override {}
    void on_session_error(proton::session&) override {}
    void on_sender_error(proton::sender&) override {}
    void on_receiver_error(proton::receiver&) override {}
    void on_error(const proton::error_condition&) override {}
    // listen_handler
    void on_open(proton::listener& l) override;
    proton::connection_options on_accept(proton::listener&) override;
    void on_error(proton::listener&, const std::string&) override;

    const mini_broker_options options_;
    // container thread only
    std::map<std::string, std::deque<proton::message>> queues_;
    std::map<std::string, std::vector<proton::sender>> consumers_;
    int received_ = 0;
    int kept_ = 0;
    int dynamic_ = 0;

    proton::container container_;
    std::thread thread_;
    std::atomic<uint16_t> port_{0};
    std::atomic<int> dropped_{0};
    std::mutex mu_;
    std::condition_variable cv_;
    bool listening_done_ = false;
};

} // namespace wharf::client::test
