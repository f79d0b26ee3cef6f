#pragma once
// redirect_peer: a tiny AMQP peer (Proton C++) that refuses every attach
// with amqp:link:redirect to a port it is told — the way wharfd does it: an
// attach with a null terminus, then a detach whose info map is {hostname,
// network-host, port, address}. Two of them pointing at each other make a
// redirect loop. With `hold` > 0 it accepts producers' links instead, takes
// `hold` messages without settling them, and then redirects the link (an
// established link whose queue moved). With `open_then_redirect` it accepts
// every attach (a real terminus) and redirects the link at once, in the same
// callback: two of them make a loop of links that open. Its container runs
// on a thread of its own; port() and redirect_to() may be called from the
// test's thread.

#include <proton/container.hpp>
#include <proton/error_condition.hpp>
#include <proton/link.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/messaging_handler.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

struct pn_link_t;

namespace wharf::client::test {

struct redirect_peer_options {
    int hold = 0;                    // > 0: take this many messages, then redirect
    bool open_then_redirect = false; // open every link, then redirect it at once
};

class redirect_peer : public proton::messaging_handler, public proton::listen_handler {
  public:
    explicit redirect_peer(const std::string& container_id, redirect_peer_options o = {});
    ~redirect_peer();
    redirect_peer(const redirect_peer&) = delete;
    redirect_peer& operator=(const redirect_peer&) = delete;

    uint16_t port() const { return port_.load(); } // 0 if it could not listen
    void redirect_to(uint16_t port) { target_.store(port); }
    int attaches() const { return attaches_.load(); }

  private:
    void redirect(pn_link_t* c, const std::string& address);
    void refuse_or_open(pn_link_t* c, bool sender);
    static std::string address_of(pn_link_t* c);

    void on_container_start(proton::container& c) override;
    void on_sender_open(proton::sender& s) override;
    void on_receiver_open(proton::receiver& r) override;
    void on_message(proton::delivery& d, proton::message& m) override;
    void on_sender_error(proton::sender&) override {}
    void on_receiver_error(proton::receiver&) override {}
    void on_transport_error(proton::transport&) override {}
    void on_connection_error(proton::connection&) override {}
    void on_session_error(proton::session&) override {}
    void on_error(const proton::error_condition&) override {}
    // listen_handler
    void on_open(proton::listener& l) override;
    proton::connection_options on_accept(proton::listener&) override;
    void on_error(proton::listener&, const std::string&) override;

    const int hold_;
    const bool open_then_redirect_;
    std::map<pn_link_t*, int> held_; // container thread only
    proton::container container_;
    std::thread thread_;
    std::atomic<uint16_t> port_{0};
    std::atomic<uint16_t> target_{0};
    std::atomic<int> attaches_{0};
    std::mutex mu_;
    std::condition_variable cv_;
    bool listening_done_ = false;
};

} // namespace wharf::client::test
