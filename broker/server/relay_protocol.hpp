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

#include "broker/server/busy_poll.hpp"

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
// The description is cut to `max_description` bytes (the client's frame).
void apply(const condition& from, pn_condition_t* to, size_t max_description = 1024);

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

// Deliveries waiting for the far end's outcome, by the id their transfer
// message carried (numbered by the side that received them).
using unsettled_map = std::unordered_map<uint64_t, pn_delivery_t*>;

// What few messages carry: attach fields, conditions, rich delivery states.
struct details {
    // attach / attached
    std::string name;
    bool client_sends = false;
    terminus source, target;
    int snd_settle_mode = 0, rcv_settle_mode = 0;
    std::weak_ptr<mailbox> reply;       // attach: where the owner side answers
    condition cond;                     // refused / detach
    bool owner_acks = false;            // attached (client receives): the owner takes the
                                        // relay's answers for messages the client never
                                        // settles itself (relay_batch.hpp, pre-settled)
    state st;                           // disposition: a rejected or modified state
};

// Kept small: transfers, flows and dispositions are the message path.
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
    uint64_t limit = 0;                 // flow
    uint64_t state = 0;                 // disposition: PN_ACCEPTED, ...; 0 = none
    uint64_t id = 0;                    // transfer: its number at the side that received it;
                                        // disposition: the number of the transfer it answers
    bool drain = false;                 // flow
    bool settled = false;               // transfer / disposition
    uint8_t back = 0;                   // disposition: 0, or why the client never got the message
                                        // (engine::outcome_kind unsent or too_large)
    bool closed = true;                 // detach
    std::string tag;                    // transfer
    std::string bytes;                  // transfer
    std::unique_ptr<details> more;      // see details

    details& x() {
        if (!more) more = std::make_unique<details>();
        return *more;
    }
    const condition* cond() const { return more ? &more->cond : nullptr; }
};

// Sends a transfer message's bytes on `l` with its tag and settled flag; an
// unsettled delivery keeps the message's id as its context (its outcome is
// reported under that id: see id_of).
void send(pn_link_t* l, const message& m);
uint64_t id_of(pn_delivery_t* d);
// Applies a disposition message (state, settlement) to the delivery it answers.
void settle(const message& m, unsettled_map& unsettled);
// The peer's state of `d` into a disposition message.
void capture_state(message& m, pn_delivery_t* d);

// One connection's inbox for relay messages: any thread posts, the
// connection takes them on its own thread when woken.
class mailbox {
  public:
    explicit mailbox(pn_connection_t* c) : conn_(c) {}
    // False when the connection is gone (the messages are dropped).
    bool post(message&& m) {
        std::lock_guard l(mu_);
        if (conn_ == nullptr) return false;
        const bool wake = pending_.empty();
        pending_.push_back(std::move(m));
        if (wake) wake_connection(conn_);
        return true;
    }
    bool post_all(std::vector<message>& ms) {
        std::lock_guard l(mu_);
        if (conn_ == nullptr) return false;
        const bool wake = pending_.empty();
        if (pending_.empty()) pending_.swap(ms);
        else pending_.insert(pending_.end(), std::make_move_iterator(ms.begin()), std::make_move_iterator(ms.end()));
        ms.clear();
        if (wake) wake_connection(conn_);
        return true;
    }
    void take(std::vector<message>& out) {
        out.clear();
        std::lock_guard l(mu_);
        out.swap(pending_);
    }
    // The connection's thread, before the connection is freed: what was
    // still waiting (for the connection to answer attaches it never saw).
    std::vector<message> close() {
        std::lock_guard l(mu_);
        conn_ = nullptr;
        return std::move(pending_);
    }

  private:
    std::mutex mu_;
    pn_connection_t* conn_;
    std::vector<message> pending_;
};

// Messages a connection sends during one event batch, one post per
// destination at the batch's end (one lock and one wake-up, not one per
// message). Order per destination is kept. The vectors are reused from
// batch to batch (a post hands back the mailbox's spent one), so a busy
// relay does not allocate and grow them afresh each time.
class batch {
  public:
    void add(const std::shared_ptr<mailbox>& to, message&& m) {
        if (!to) return;
        for (auto& [box, ms] : out_) {
            if (box == to) {
                ms.push_back(std::move(m));
                return;
            }
        }
        std::vector<message> ms;
        if (!spare_.empty()) {
            ms = std::move(spare_.back());
            spare_.pop_back();
        }
        ms.push_back(std::move(m));
        out_.emplace_back(to, std::move(ms));
    }
    void flush() {
        for (auto& [box, ms] : out_) {
            box->post_all(ms); // hands back the mailbox's spent vector
            ms.clear();        // (or keeps what a closed mailbox refused: dropped)
            if (ms.capacity() != 0 && spare_.size() < max_spare) spare_.push_back(std::move(ms));
        }
        out_.clear();
    }

  private:
    static constexpr size_t max_spare = 4;
    std::vector<std::pair<std::shared_ptr<mailbox>, std::vector<message>>> out_;
    std::vector<std::vector<message>> spare_;
};

} // namespace wharf::server::relay
