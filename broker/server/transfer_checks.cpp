// amqp_connection: transfers a peer had no right to send. Proton takes
// both kinds below without a word, so the node checks them itself:
// - beyond the credit the node gave: the link's producer could otherwise
//   make the node hold any number of messages (a full queue's "block"
//   policy holds a producer's credit back, not what it sends anyway);
// - on a link where the node is the sender (the client attached as
//   receiver): Proton makes such a delivery the link's current one, and
//   the node's next message would be written into it, under the client's
//   tag. Nothing more is sent on the link, and the connection is closed:
//   Proton would never send the link's detach (it waits to send the
//   client's delivery as if it were the node's), and settling that
//   delivery would send the client's bytes back to it.

#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/delivery.h>
#include <proton/link.h>

#include <string>

namespace wharf::server {

bool amqp_connection::transfer_allowed(link_ctx& lc, pn_delivery_t* d) {
    pn_link_t* l = lc.link;
    if (l == nullptr || lc.closed) return true;
    if (pn_link_is_sender(l)) {
        // The node's own deliveries are never current once sent (each is
        // advanced at once); a relay's batch in progress is the exception.
        if (pn_link_current(l) != d || d == lc.out) return true;
        foreign_delivery(lc);
        return false;
    }
    // Proton counts a delivery against the link's credit as it arrives;
    // the node never takes credit back, so below zero the peer sent more
    // than it was given.
    if (pn_link_remote_credit(l) >= 0) return true;
    end_link(lc, errc::transfer_limit_exceeded,
             std::string("a transfer came on link '") + pn_link_name(l) +
                 "' beyond the credit this node gave it: wait for credit (a flow frame) before sending");
    return false;
}

// Proton keeps a link's credit in a signed 32-bit int: a client that grants
// 2^31 or more (a legal uint) leaves it negative, and the node would send
// nothing and never answer a drain. The node sends a plain consumer nothing
// beyond its credit, so any negative credit there is such a grant; a
// relaying node may have sent a few of the owner's messages beyond it
// (the client lowered its credit meanwhile), so there only a credit far
// below zero is taken for one.
bool amqp_connection::credit_countable(pn_link_t* l) {
    link_ctx* lc = ctx_of(l);
    if (lc == nullptr || !lc->consumer || lc->closed || lc->batch != 0 || lc->credits) return true;
    const int credit = pn_link_credit(l);
    if (credit >= (lc->relayed ? -(1 << 24) : 0)) return true;
    end_link(*lc, errc::invalid_field,
             std::string("the link-credit granted on link '") + pn_link_name(l) +
                 "' is 2147483648 or more, which this node cannot count: grant at most 2147483647");
    return false;
}

bool amqp_connection::foreign_delivery(link_ctx& lc) {
    pn_link_t* l = lc.link;
    if (l == nullptr || lc.closed) return false;
    pn_delivery_t* current = pn_link_current(l);
    if (current == nullptr || current == lc.out) return false;
    const std::string why = std::string("a transfer came on link '") + pn_link_name(l) +
                            "', where this node is the sender (the link was attached as a receiver): a receiver "
                            "sends no messages";
    detach_link(lc); // what the node sent on it goes back to the queue, as on any detach
    set_condition(pn_connection_condition(conn_), errc::not_allowed, why);
    pn_connection_close(conn_);
    return true;
}

} // namespace wharf::server
