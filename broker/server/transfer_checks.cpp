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
    // The node takes each delivery off the link (pn_link_advance) before
    // the next, and Proton counts it against the link's credit then: the
    // current one was sent within the credit the node gave if some is left
    // (the node never takes credit back). Deliveries after it in the same
    // read are judged in their turn, so those within credit are kept.
    if (pn_link_current(l) != d || pn_link_credit(l) > 0) return true;
    end_link(lc, errc::transfer_limit_exceeded,
             std::string("a transfer came on link '") + pn_link_name(l) +
                 "' beyond the credit this node gave it: wait for credit (a flow frame) before sending");
    return false;
}

// Proton keeps a link's credit in a signed 32-bit int: a client that grants
// 2^31 or more (a legal uint) leaves it negative, and the node would send
// nothing and never answer a drain. Credit plus what Proton holds queued
// is the client's grant less what reached the wire; it is below zero
// legitimately only by what is in flight, when the client lowered its
// credit under the messages it had not yet seen. How many are in flight
// the node cannot tell (settled ones, a browser's copies, leave no trace),
// so a grant is taken for 2^31 or more when the deficit is larger than any
// window (2^30), or when nothing was ever sent on the link (so nothing can
// be in flight): a client granting 4,294,967,295 at attach is caught, one
// granting it later is not (it gets nothing until it grants again).
bool amqp_connection::credit_countable(pn_link_t* l) {
    link_ctx* lc = ctx_of(l);
    if (lc == nullptr || !lc->consumer || lc->closed || lc->batch != 0 || lc->credits) return true;
    const int64_t deficit = -(static_cast<int64_t>(pn_link_credit(l)) + pn_link_queued(l));
    if (deficit <= 0) return true;
    if (deficit <= (1 << 30) && lc->sent != 0) return true;
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
