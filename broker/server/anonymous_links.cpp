// amqp_connection: anonymous-relay messages (a producer with a null
// target): each goes to the queue its 'to' names, here or, in a cluster, at
// its owner (relay mode) or refused naming the owner (redirect mode). A
// message to an address the cluster has not placed yet waits on its link
// until it is placed (handle(connection_outbox::resolved&)).

#include "broker/common/names.hpp"
#include "broker/common/text.hpp"
#include "broker/server/amqp_connection.hpp"

#include <algorithm>

namespace wharf::server {

// In a cluster, an anonymous-relay message goes into a local queue only if
// this node owns it: no two nodes may serve one queue. In relay mode it goes
// to its owner; in redirect mode it is refused, naming the owner.
amqp_connection::anon_route amqp_connection::route_anonymous(const std::string& to) {
    anon_route out;
    for (size_t i = 0; i < settings_.resolvers.size(); ++i) {
        auto res = settings_.resolvers[i]->lookup(to);
        if (!res) {
            out.kind = anon_route::unknown;
            out.resolver = i;
            return out;
        }
        switch (res->what) {
        case plugins::resolution::kind::pass: continue;
        case plugins::resolution::kind::local: return out;
        case plugins::resolution::kind::relay:
            out.kind = anon_route::relay;
            out.to = std::move(*res);
            return out;
        case plugins::resolution::kind::redirect:
            out.kind = anon_route::refuse;
            out.err = error{errc::not_found, "queue '" + to + "' is on node " + res->node_id + " at " + res->host +
                                                 ":" + std::to_string(res->port) +
                                                 "; send it there (this node does not relay)"};
            return out;
        case plugins::resolution::kind::refuse:
            out.kind = anon_route::refuse;
            out.err = res->err;
            return out;
        }
    }
    return out;
}

void amqp_connection::dispatch_anonymous(link_ctx& lc, pn_delivery_t* d, engine::incoming_message&& m,
                                         bool may_wait) {
    // An address no queue can have is refused here, before the cluster is
    // asked to place it: an empty 'to' used to be placed as a queue named
    // '' (and its message never answered, holding the link's credit).
    std::optional<error> bad;
    if (m.to.empty())
        bad = error{errc::invalid_field, "message has no 'to' address: a sender with a null target "
                                         "(anonymous relay) must set properties.to"};
    else if (auto why = check_queue_name(m.to))
        bad = error{errc::invalid_field, "message's 'to' " + quoted(printable(m.to, 200)) + " cannot name a queue: " + *why};
    if (bad) {
        if (d != nullptr) reject_now(d, bad->code, bad->description);
        else refuse_presettled(lc, *bad);
        return;
    }
    // Messages to one address keep their order: behind one that waits for
    // its address to be placed, the next waits too.
    const bool behind = may_wait && std::any_of(lc.anon_held.begin(), lc.anon_held.end(),
                                                [&](const auto& h) { return h.m.to == m.to; });
    if (behind) {
        lc.anon_held.push_back({d, std::move(m)});
        return;
    }
    anon_route r = route_anonymous(m.to);
    if (r.kind == anon_route::unknown && !may_wait) {
        r.kind = anon_route::refuse;
        r.err = error{errc::not_found,
                      "queue '" + m.to + "' has no owner: the cluster could not place it (see the node's log)"};
    }
    switch (r.kind) {
    case anon_route::refuse:
        if (d != nullptr) reject_now(d, r.err.code, r.err.description);
        else refuse_presettled(lc, r.err);
        return;
    case anon_route::relay:
        relay_anonymous(lc, d, r.to, std::string(m.body.bytes()), d == nullptr);
        return;
    case anon_route::unknown: {
        // The cluster is placing this address: hold the message until it
        // knows (other messages on the link go on meanwhile).
        const std::string to = m.to;
        lc.anon_held.push_back({d, std::move(m)}); // the first held for `to` (see `behind`)
        std::weak_ptr<connection_outbox> out = outbox_;
        const engine::link_id id = lc.id;
        const size_t index = r.resolver;
        settings_.resolvers[index]->resolve(plugins::attach_request{to, true, {}},
                                            [out, id, index, to](plugins::resolution res) {
                                                if (auto o = out.lock())
                                                    o->deliver_resolution({id, index, std::move(res), to});
                                            });
        return;
    }
    case anon_route::local:
        mark_dirty(lc);
        lc.to_publish.push_back(std::move(m));
        lc.awaiting.push_back({d, 0});
        return;
    }
}

} // namespace wharf::server
