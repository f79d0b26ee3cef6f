#include "client/cluster_client.hpp"

#include "client/detail/client_state.hpp"
#include "client/detail/node_connection.hpp"
#include "client/detail/redirect_link.hpp"

namespace wharf::client {

namespace detail {

std::shared_ptr<node_connection> client_state::node_for(const endpoint& where, const std::string& vhost) {
    std::shared_ptr<node_connection> node;
    {
        std::lock_guard lock(mu);
        if (closed) return nullptr;
        auto& slot = nodes[where.key()];
        if (slot && !slot->ended()) return slot;
        if (slot) retired.push_back(slot);
        proton::connection_options opts = options.connection;
        if (!vhost.empty()) opts.virtual_host(vhost);
        slot = std::make_shared<node_connection>(where, std::move(opts));
        node = slot;
    }
    node->connect(container); // outside the lock: a failure runs its tasks' fail()
    return node;
}

} // namespace detail

// ---- link_ref ------------------------------------------------------------------

void link_ref::close() {
    if (link_) link_->request_close();
}

bool link_ref::post(proton::work f) { return link_ && link_->post(std::move(f)); }

std::string link_ref::node_address() const { return link_ ? link_->node_address() : ""; }

int link_ref::redirects() const { return link_ ? link_->redirects() : 0; }

// ---- cluster_client ------------------------------------------------------------

cluster_client::cluster_client(proton::container& c, client_options o)
    : state_(std::make_shared<detail::client_state>(c, std::move(o))) {}

cluster_client::~cluster_client() = default;

link_ref cluster_client::open_sender(const std::string& url, const std::string& address, link_handler& h,
                                     proton::sender_options opts) {
    return open(true, url, address, h, std::move(opts), {});
}

link_ref cluster_client::open_receiver(const std::string& url, const std::string& address, link_handler& h,
                                       proton::receiver_options opts) {
    return open(false, url, address, h, {}, std::move(opts));
}

link_ref cluster_client::open(bool sender, const std::string& url, const std::string& address, link_handler& h,
                              proton::sender_options sopts, proton::receiver_options ropts) {
    std::string why;
    const auto where = parse_url(url, &why);
    if (!where) {
        h.on_link_failure({sender, address, proton::error_condition("amqp:invalid-field", "bad url: " + why)});
        return {};
    }
    auto link = std::make_shared<detail::redirect_link>(state_, sender, address, h, std::move(sopts),
                                                        std::move(ropts));
    bool closed = false;
    {
        std::lock_guard lock(state_->mu);
        closed = state_->closed;
        if (!closed) state_->links.push_back(link);
    }
    if (closed) {
        h.on_link_failure(
            {sender, address, proton::error_condition("amqp:illegal-state", "the cluster_client is closed")});
        return {};
    }
    link->start(*where);
    return link_ref(link);
}

int cluster_client::close() {
    std::vector<std::shared_ptr<detail::redirect_link>> links;
    std::vector<std::shared_ptr<detail::node_connection>> nodes;
    {
        std::lock_guard lock(state_->mu);
        state_->closed = true;
        links = state_->links;
        for (auto& [key, node] : state_->nodes) nodes.push_back(node);
    }
    // Links first: each detaches before its connection closes.
    for (auto& l : links) l->request_close();
    int closing = 0;
    for (auto& n : nodes) closing += n->close() ? 1 : 0;
    return closing;
}

std::vector<connection_info> cluster_client::connections() const {
    std::vector<connection_info> out;
    std::lock_guard lock(state_->mu);
    for (const auto& [key, node] : state_->nodes) out.push_back({key, node->node_id(), node->is_open()});
    return out;
}

} // namespace wharf::client
