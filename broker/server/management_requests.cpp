// amqp_connection: requests to the $management node. A request is decoded
// on the connection's thread and answered (or refused) there; the
// management service runs it on its own thread and puts the reply into a
// queue of this node.

#include "broker/management/management_service.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <spdlog/spdlog.h>

namespace wharf::server {

void amqp_connection::on_management_request(link_ctx& lc, pn_delivery_t* d) {
    std::string bytes;
    if (lc.link == nullptr || !take_whole(d, bytes)) return;
    auto req = management::decode_request(bytes);
    if (req) {
        if (auto bad = unanswerable(req->reply_to)) req = fail(std::move(*bad));
    }
    if (!req) {
        if (pn_delivery_settled(d)) {
            // Sent pre-settled: there is no outcome to refuse it with.
            spdlog::info("{}: management: a pre-settled request was dropped: {}", settings_.node_id,
                         req.error().description);
            pn_delivery_settle(d);
        } else {
            reject_now(d, req.error().code, req.error().description);
        }
    } else {
        pn_delivery_update(d, PN_ACCEPTED);
        pn_delivery_settle(d);
        settings_.management->submit(std::move(req.value()));
    }
    top_up_credit(lc);
}

// Management replies go into a queue of this node only (they never make a
// queue that another node owns, and the node does not relay them): a
// request whose reply-to is another node's queue is refused before it runs,
// rather than run and its answer dropped.
std::optional<error> amqp_connection::unanswerable(const std::string& reply_to) {
    auto route = route_anonymous(reply_to);
    const std::string fix = "; management replies go to a queue of the node that answers: reply to a temporary "
                            "queue (a dynamic receiver) on this connection";
    switch (route.kind) {
    case anon_route::local: {
        // The reply is published as a message to reply_to: a temporary ('$')
        // queue must exist already, and so must any other unless messages
        // create queues. Else the request is refused before it runs (its
        // answer would be lost).
        const bool temporary = reply_to[0] == '$';
        if (!temporary && engine_.auto_creates_queues()) return std::nullopt;
        if (temporary && is_own_consumer_address(reply_to)) return std::nullopt; // the usual case, without asking the engine
        if (engine_.has_queue(reply_to)) return std::nullopt;
        return error{errc::invalid_field,
                     "reply-to '" + reply_to + "' is " +
                         (temporary ? std::string("no temporary queue of this node")
                                    : std::string("no queue of this node (and auto-create-queues is off)")) +
                         fix};
    }
    case anon_route::relay:
        return error{errc::invalid_field, "reply-to '" + reply_to + "' is a queue of node " + route.to.node_id +
                                              ", not of this node" + fix + ", or send the request to node " +
                                              route.to.node_id};
    case anon_route::refuse:
        return error{errc::invalid_field, "reply-to '" + reply_to + "': " + route.err.description + fix};
    case anon_route::unknown:
        // Not placed yet, perhaps by the reply receiver's attach still on
        // its way: the request runs, and the answer goes there if by then
        // the queue is this node's.
        return std::nullopt;
    }
    return std::nullopt;
}

// Whether an open link of this connection, sending to the client, is on
// `address`: its source as this node answered the attach (a temporary
// queue's generated name).
bool amqp_connection::is_own_consumer_address(const std::string& address) const {
    for (const auto& [id, lc] : links_) {
        if (!lc->consumer || lc->closed || lc->link == nullptr) continue;
        const char* source = pn_terminus_get_address(pn_link_source(lc->link));
        if (source != nullptr && address == source) return true;
    }
    return false;
}

} // namespace wharf::server
