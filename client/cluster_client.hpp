#pragma once
// cluster_client: opens senders and receivers by queue name at any node of a
// Wharf cluster (or any AMQP 1.0 broker) and follows amqp:link:redirect
// transparently (AMQP 1.0 §2.8.15): it connects to the node the redirect
// names — reusing its open connection to that host:port if it has one —
// and attaches again there with the same link options; the application sees
// only the final link. Redirects of established links (a queue moved) are
// followed the same way. See client/README.md.
//
// Threads: every method may be called from any thread, including Proton
// callbacks. Link events go to the application's link_handler on the thread
// of the link's connection. The client must outlive container::run(): Proton
// holds pointers to its handlers until the container has stopped.

#include "client/link_handler.hpp"

#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>
#include <proton/work_queue.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace wharf::client {

namespace detail {
class redirect_link;
struct client_state;
} // namespace detail

struct client_options {
    // For every connection the client opens (container id, SASL, frame size,
    // idle timeout...). The library sets the handler, and the virtual host
    // when a redirect names a hostname other than its network-host. Do not
    // set reconnect: a lost connection is reported to its links instead.
    proton::connection_options connection;
    // Redirects followed for one attach before giving up with
    // too_many_redirects ("n1 -> n2 -> n1 -> ...").
    int max_redirects = 5;
    // A link that stayed open this long starts a fresh count of redirects
    // when its queue moves; one redirected sooner counts on (so a pair of
    // nodes that accept and at once redirect cannot loop forever).
    std::chrono::milliseconds redirect_count_reset{1000};
    // How long an attach may wait for the node: for the connection to open
    // (a node that accepts TCP but never sends its open) and then for the
    // answer to the attach. Past it the link fails: redirect-unreachable
    // ("... redirected the link to HOST:PORT, which cannot be reached (no
    // open from HOST:PORT within 60 s)"), or attach-failed for the
    // application's own url. Longer than a Wharf node's park-timeout
    // (default 30 s: an attach to a queue that is moving is answered when
    // the move ends), so that a parked attach is not given up.
    std::chrono::milliseconds attach_timeout{60000};
};

// One connection of the client, for diagnostics and tests.
struct connection_info {
    std::string address; // host:port
    std::string node_id; // the peer's container id, once open
    bool open = false;   // open now (false: still connecting, or ended)
};

// The application's handle of one link opened through a cluster_client.
// Copyable; valid while the client lives.
class link_ref {
  public:
    link_ref() = default;
    bool valid() const { return link_ != nullptr; }

    // Detaches the link (closing). Any thread. The handler gets the usual
    // on_sender_close / on_receiver_close when the peer answers; a link that
    // was between two nodes just stops.
    void close();
    // Runs f on the thread that delivers this link's events (following the
    // link if it moves). False if the link or its connection is gone; f may
    // still not run if the connection ends before it gets to it.
    bool post(proton::work f);
    // host:port of the node the link is attached to, or being attached to.
    std::string node_address() const;
    // Redirects followed over the link's life.
    int redirects() const;

  private:
    friend class cluster_client;
    explicit link_ref(std::shared_ptr<detail::redirect_link> l) : link_(std::move(l)) {}
    std::shared_ptr<detail::redirect_link> link_;
};

class cluster_client {
  public:
    explicit cluster_client(proton::container& c, client_options o = {});
    ~cluster_client();
    cluster_client(const cluster_client&) = delete;
    cluster_client& operator=(const cluster_client&) = delete;

    // Attaches a sender (receiver) to `address` at the node `url`
    // ("[amqp://]HOST[:PORT]") with `opts` (its handler is ignored: events go
    // to `h`, which must outlive the client). A bad url is reported at once,
    // on the calling thread, through h.on_link_failure; so is a call after
    // close() (the returned link_ref is then invalid).
    link_ref open_sender(const std::string& url, const std::string& address, link_handler& h,
                         proton::sender_options opts = {});
    link_ref open_receiver(const std::string& url, const std::string& address, link_handler& h,
                           proton::receiver_options opts = {});

    // Detaches every link and closes every connection of the client. Any
    // thread. Returns how many connections were still up (they close
    // asynchronously; container::run() returns once they are all gone).
    int close();

    // The connections the client keeps, one per host:port.
    std::vector<connection_info> connections() const;

  private:
    link_ref open(bool sender, const std::string& url, const std::string& address, link_handler& h,
                  proton::sender_options sopts, proton::receiver_options ropts);

    std::shared_ptr<detail::client_state> state_;
};

} // namespace wharf::client
