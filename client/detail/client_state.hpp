#pragma once
// client_state: what a cluster_client shares with its links: the container,
// the options, and the table of connections (one per host:port). Owned by
// cluster_client (shared_ptr; links hold a weak_ptr). Any thread, under mu.

#include "client/cluster_client.hpp"
#include "client/detail/deadline_timer.hpp"
#include "client/detail/node_connection.hpp"
#include "client/redirect_target.hpp"

#include <proton/container.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wharf::client::detail {

class redirect_link;

struct client_state {
    client_state(proton::container& c, client_options o) : container(c), options(std::move(o)) {}

    // The connection to `where`, open or opening: the one the client has,
    // or a new one if it has none or that one ended. `vhost` (may be empty)
    // is asked for when a new connection is made. nullptr once closed.
    std::shared_ptr<node_connection> node_for(const endpoint& where, const std::string& vhost);

    proton::container& container;
    const client_options options;

    mutable std::mutex mu;
    std::map<std::string, std::shared_ptr<node_connection>> nodes; // current one per host:port
    std::vector<std::shared_ptr<node_connection>> retired;         // ended, kept for Proton
    std::vector<std::shared_ptr<redirect_link>> links;             // every link, kept for Proton
    bool closed = false;

    // Attach/open time-outs (client_options::attach_timeout). Declared last:
    // destroyed (its thread joined) first.
    deadline_timer timer;
};

} // namespace wharf::client::detail
