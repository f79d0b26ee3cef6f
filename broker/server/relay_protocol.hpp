#pragma once
// What crosses between a client's connection and a peer connection (to the
// node that owns a queue) for a relayed link. Plain data: a Proton object
// belongs to one connection and its thread, so termini, delivery states and
// conditions travel as copies (AMQP values as encoded bytes).
//
// One relayed link = the client's link at this node + its twin at the
// owner. Both sides keep delivery tags, settled flags and message bytes as
// they came; credit is counted as absolute limits (transfers so far + link
// credit) so that a late message never makes the counts drift.

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/terminus.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::server::relay {

struct terminus {
    pn_terminus_type_t type = PN_UNSPECIFIED;
    std::string address;
    bool has_address = false;
    bool dynamic = false;
    pn_durability_t durability = PN_NONDURABLE;
    pn_expiry_policy_t expiry = PN_EXPIRE_WITH_SESSION;
    pn_seconds_t timeout = 0;
    pn_distribution_mode_t distribution = PN_DIST_MODE_UNSPECIFIED;
    std::string properties, capabilities, outcomes, filter; // encoded AMQP values ("" = none)
};
terminus capture(pn_terminus_t* t);
void apply(const terminus& from, pn_terminus_t* to);

struct condition {
    std::string name, description, info; // info: encoded map ("" = none)
    bool set() const { return !name.empty(); }
};
condition capture(pn_condition_t* c);
void apply(const condition& from, pn_condition_t* to);

// A delivery's outcome or state as one side reported it.
struct state {
    uint64_t type = 0;        // PN_ACCEPTED, PN_REJECTED, PN_RELEASED, PN_MODIFIED, PN_RECEIVED; 0 = none
    condition cond;           // rejected
    bool failed = false, undeliverable = false;
    std::string annotations;  // modified: encoded map
};
state capture_remote(pn_delivery_t* d);
// Sets the local state of `d` (then call pn_delivery_update(d, s.type)).
void apply_local(const state& s, pn_delivery_t* d);

class mailbox;
struct message;

using unsettled_map = std::unordered_map<std::string, pn_delivery_t*>; // by delivery tag

// Sends a transfer message's bytes on `l` with its tag and settled flag;
// an unsettled delivery is remembered in `unsettled`.
void send(pn_link_t* l, const message& m, unsettled_map& unsettled);
// Applies a disposition message (state, settlement) to the delivery with its tag.
void settle(const message& m, unsettled_map& unsettled);

struct message {
    enum class kind {
        attach,       // client → owner: open the twin link
        attached,     // owner → client: the twin is open (termini as the owner answered)
        refused,      // owner → client: the owner refused the attach (cond)
        flow,         // client → owner (client receives): limit, drain;
                      // owner → client (client sends): limit
        transfer,     // either way: one whole message
        disposition,  // either way: a delivery's state and/or settlement
        drained,      // owner → client: the drain the client asked for is done
        detach,       // either way: the link ended (cond, closed)
    };
    kind what = kind::detach;
    uint64_t relay = 0;                 // the relayed link, named by the client side
    // attach / attached
    std::string name;
    bool client_sends = false;
    terminus source, target;
    int snd_settle_mode = 0, rcv_settle_mode = 0;
    std::weak_ptr<mailbox> reply;       // attach: where the owner side answers
    // flow
    uint64_t limit = 0;
    bool drain = false;
    // transfer / disposition
    std::string tag;
    std::string bytes;
    bool settled = false;
    state st;
    // refused / detach
    condition cond;
    bool closed = true;
};

// One connection's inbox for relay messages: any thread posts, the
// connection takes them on its own thread when woken.
class mailbox {
  public:
    explicit mailbox(pn_connection_t* c) : conn_(c) {}
    // False when the connection is gone (the message is dropped).
    bool post(message&& m) {
        std::lock_guard l(mu_);
        if (conn_ == nullptr) return false;
        const bool wake = pending_.empty();
        pending_.push_back(std::move(m));
        if (wake) pn_connection_wake(conn_);
        return true;
    }
    void take(std::vector<message>& out) {
        out.clear();
        std::lock_guard l(mu_);
        out.swap(pending_);
    }
    // The connection's thread, before the connection is freed.
    void close() {
        std::lock_guard l(mu_);
        conn_ = nullptr;
        pending_.clear();
    }

  private:
    std::mutex mu_;
    pn_connection_t* conn_;
    std::vector<message> pending_;
};

} // namespace wharf::server::relay
