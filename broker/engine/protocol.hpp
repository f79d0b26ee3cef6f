#pragma once
// What crosses the hand-off between connections and the queue engine.
// Connections post batches of commands; the engine answers with batches of
// events into each connection's outbox. Plain data, moved, never shared.

#include "broker/common/errors.hpp"
#include "broker/common/limits.hpp"
#include "broker/engine/message_body.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace wharf::amqp {
class selector;
}

namespace wharf::engine {

// The longest queue name (broker/common/limits.hpp).
using wharf::max_queue_name;

// Names a link node-wide (allocated by the connection layer, never reused).
using link_id = uint64_t;
// Links inside the node (plugins' taps) are numbered from here up: the
// connection layer's ids never reach it.
inline constexpr link_id internal_link_base = link_id{1} << 62;
inline bool is_internal(link_id l) { return l >= internal_link_base; }

// Where a link's client should attach instead (AMQP link redirect).
struct redirect_to {
    std::string host;
    uint16_t port = 0;
};

// ---- commands: connection → engine -------------------------------------

class outbox;

struct cmd_attach_consumer {
    link_id link;
    std::string address;        // ignored when dynamic
    bool dynamic = false;       // create a temporary queue, removed on detach
    bool browse = false;        // distribution-mode copy: see, do not consume
    bool settle_on_send = false; // the link is pre-settled (at-most-once)
    std::shared_ptr<outbox> out;
    // A JMS selector: the consumer gets only the messages it selects (the
    // others stay for the queue's other consumers). nullptr: every message.
    std::shared_ptr<const amqp::selector> selector;
};

struct cmd_attach_producer {
    link_id link;
    std::string address;        // empty: anonymous relay, route by `to`
    std::shared_ptr<outbox> out;
};

// The consumer may have `limit - (deliveries sent so far)` more messages:
// limit = deliveries the connection has sent + the link's current credit.
struct cmd_credit {
    link_id link;
    uint64_t limit;
    bool drain;
};

struct incoming_message {
    message_ref body;
    int64_t expiry_ms = 0;        // absolute, 0 = never
    uint32_t delivery_count = 0;  // from the header
    std::string to;               // anonymous relay only
    bool settled = false;         // pre-settled by the producer: no outcome wanted
    bool durable = false;         // header.durable
};

struct cmd_publish {
    link_id link;
    std::vector<incoming_message> messages;
};

enum class outcome_kind {
    accepted,
    rejected,
    released,
    modified_failed,             // delivery-failed
    modified_undeliverable,      // undeliverable-here
    modified_failed_undeliverable,
    unsent,                      // never reached the client (no credit, link gone)
    too_large,                   // never sent: larger than the client's max-message-size;
                                 // it stays for the link's other consumers
};

struct settlement {
    uint64_t seq;
    outcome_kind outcome;
};

// A modified outcome's message-annotations (AMQP 1.0 §3.4.5) for the
// message `seq`: one encoded map, checked (amqp::check_annotations) by the
// connection, to combine with the message's own when it goes back.
struct annotation_change {
    uint64_t seq;
    std::string map;
};

struct cmd_settle {
    link_id link;
    std::vector<settlement> settlements;
    std::optional<uint64_t> limit; // with unsent: the link's true credit limit now
    std::vector<annotation_change> annotations; // rare: most settlements carry none
};

// The link ended. sent_unsettled: deliveries the client received but never
// settled (they come back with delivery-count + 1).
struct cmd_detach {
    link_id link;
    std::vector<uint64_t> sent_unsettled;
    // Every message the link still holds was sent (a relay's batch link,
    // whose deliveries are pre-settled: the owner keeps no list of them).
    bool all_sent = false;
    // A pre-settled consumer's messages that the link's peer never answered
    // may have reached the client: they count as sent, never to go twice
    // (a relay's batch link that ended without the relay's plain detach:
    // the connection dropped, the relay said its answers were lost, or a
    // relay without detach answers at a queue move). Otherwise they never
    // reached it and go back.
    bool presettled_sent = false;
};

// Periodic housekeeping: expiry.
struct cmd_tick {};

// Ends every client link attached to one of these queues (ownership lost or
// moved); internal links stay. A consumer holding unsettled messages leaves
// dispatch at once but stays until its connection's cmd_detach, which tells
// what the client got, as on any detach (see cmd_detach); the queue cannot
// be handed over before.
struct cmd_detach_queues {
    std::vector<std::string> queues;
    error err;
    std::optional<redirect_to> redirect;
};

// Removes a queue that holds no message and has no link (a queue moved away).
struct cmd_delete_queue_if_idle {
    std::string queue;
    std::shared_ptr<std::function<void(bool gone)>> done; // on the strand
};

// The store made everything up to `epoch` stable (or failed to).
struct cmd_synced {
    uint64_t epoch;
    bool ok;
    std::string reason;
};

// Runs `fn` on the engine's strand (management and tests; not the message path).
// (Held by pointer: GCC 12 warns falsely about a std::function moved inside
// a variant.)
struct cmd_run {
    std::shared_ptr<std::function<void()>> fn;
};

using command = std::variant<cmd_attach_consumer, cmd_attach_producer, cmd_credit, cmd_publish,
                             cmd_settle, cmd_detach, cmd_tick, cmd_synced, cmd_detach_queues,
                             cmd_delete_queue_if_idle, cmd_run>;

// ---- events: engine → connection ---------------------------------------

struct ev_attached {
    link_id link;
    std::optional<error> err;     // set: refuse the attach with this condition
    std::string address;          // the queue's name (the generated one when dynamic)
};

struct ev_deliver {
    link_id link;
    uint64_t seq;
    message_ref body;
    uint32_t delivery_count;
    bool redelivered;             // rewrite the header: delivery-count, first-acquirer false
    bool settle_on_send;          // send it pre-settled (at-most-once, or a browser's copy)
    bool copy = false;            // a browser's copy: nothing to settle. Otherwise the
                                  // engine holds it acquired until the connection settles
                                  // it: accepted once sent pre-settled, unsent if never sent
};

struct ev_drained {
    link_id link;
};

struct publish_failure {
    uint32_t index;               // position in the cmd_publish batch
    error err;
};

// Outcomes of one cmd_publish, in order: every message not in `failures`
// is stored and must be settled accepted.
struct ev_published {
    link_id link;
    uint32_t count;
    std::vector<publish_failure> failures;
    // Answered when the store's sync came (it covers a persistent message):
    // a sync answers everything read while the one before it ran, often
    // hundreds of messages at once.
    bool after_sync = false;
};

// Block policy: stop (blocked) or resume granting producer credit.
struct ev_flow_control {
    link_id link;
    bool blocked;
};

// The engine ends a link (its queue was deleted).
struct ev_detach {
    link_id link;
    error err;
    std::optional<redirect_to> redirect;
    // The engine keeps the link's unsettled messages until the connection's
    // cmd_detach says which reached the client (a queue move; see
    // cmd_detach_queues).
    bool report = false;
};

using event = std::variant<ev_attached, ev_deliver, ev_drained, ev_published, ev_flow_control,
                           ev_detach>;

// Where the engine puts events for one connection. The engine stages events
// in staged_ (engine thread only) and hands them over with one deliver() call
// per engine run, so a batch costs one lock and one wake-up, not one per
// message.
class outbox {
  public:
    virtual ~outbox() = default;
    // Called on the engine's thread; must not call back into the engine.
    // It may leave an empty vector with spare capacity in `events`, which
    // the engine stages the next run's events in.
    virtual void deliver(std::vector<event>&& events) = 0;

  private:
    friend class queue_engine;
    std::vector<event> staged_;
    bool dirty_ = false;
};

} // namespace wharf::engine
