#pragma once
// amqp_connection: one client connection's AMQP state on top of a Proton-C
// pn_connection_t: its sessions and links, the producer and consumer sides of
// each link, and the batch of commands it owes the queue engine.
//
// Runs on whichever proactor thread is handling this connection's event batch
// (Proton serialises them: one thread at a time). Owned by server's
// connection table; destroyed after PN_TRANSPORT_CLOSED.
//
// The broker works on Proton's C engine rather than the C++ messaging_handler
// because the C++ adapter decodes every incoming transfer into a
// proton::message before the handler sees it: the broker must keep the
// producer's bytes exactly (footer included) and cannot afford a decode and a
// re-encode per message.

#include "broker/amqp/message_codec.hpp"
#include "broker/common/fifo.hpp"
#include "broker/engine/protocol.hpp"
#include "broker/engine/queue_engine.hpp"
#include "broker/server/connection_base.hpp"
#include "broker/server/pn_util.hpp"
#include "broker/server/connection_outbox.hpp"
#include "broker/server/credit_pool.hpp"
#include "broker/server/relay_batch.hpp"
#include "broker/server/relay_hub.hpp"
#include "broker/server/relay_protocol.hpp"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <deque>
#include <map>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::management {
class management_service;
} // namespace wharf::management
namespace wharf::server {

// What a connection needs from its node and listener.
struct connection_settings {
    relay_hub* relays = nullptr;     // connections to other nodes, for relayed links
    credit_budget* producers = nullptr; // the node's producer credit budget (null: none)
    management::management_service* management = nullptr; // the $management node
    std::string node_id;
    // Plugins' resolvers, in order (empty: every address is local).
    std::vector<plugins::address_resolver*> resolvers;
    // The largest message a link takes (1 .. message_ref::max_size; the
    // server maps the config's 0, "unlimited", to max_size).
    uint64_t max_message_size = engine::message_ref::max_size;
    uint32_t credit_window = 1000;
    uint64_t connection_credit = 0; // producer credit a connection's links hold together (0 = no limit)
    tick_requests* ticks = nullptr;  // the server's, for a connection that wants sooner ticks
};

// What management sees of a connection (a copy, any thread).
struct connection_info {
    uint64_t id = 0;
    std::string container;            // the client's container id
    std::string remote;               // HOST:PORT
    int64_t opened_ms = 0;            // wall clock
    struct link {
        std::string name, address;
        bool client_sends = false;
        bool relayed = false;
    };
    std::vector<link> links;
};

class amqp_connection final : public connection_base {
  public:
    amqp_connection(pn_connection_t* c, const connection_settings& s, engine::queue_engine& engine,
                    std::atomic<uint64_t>& link_ids);
    ~amqp_connection() override;
    amqp_connection(const amqp_connection&) = delete;
    amqp_connection& operator=(const amqp_connection&) = delete;

    void on_event(pn_event_t* e) override;
    // After the last event of a batch: hand the batch's commands to the
    // engine and apply whatever it has answered already.
    void end_batch() override;

    // Refuse at open with this condition (max connections, shutting down).
    void refuse(errc code, std::string description);
    // Any thread: ask the connection to close with amqp:connection:forced.
    void request_shutdown() override;
    // Any thread: close with amqp:connection:forced and this description.
    void request_close(std::string description);
    // Before the connection runs: a client that has not sent its AMQP open
    // `within` after connecting is dropped (a socket that sends nothing, or
    // half a header, would hold a connection slot for good).
    void open_within(std::chrono::milliseconds within);
    // The shortest idle-time-out the node takes from a client: it sends
    // heartbeats at half the client's, and Proton rounds 1 ms down to 0 ms,
    // sending them without pause.
    static constexpr uint32_t min_peer_idle_timeout_ms = 100;
    // Any thread, at the server's tick (once a second, or every few
    // milliseconds while some connection's producers wait for credit).
    void on_tick() override;
    connection_info info() const;
    uint64_t serial() const { return serial_; }

    bool finished() const override { return finished_; }
    pn_connection_t* pn() const override { return conn_; }

  private:
    void handle_event(pn_event_t* e);

    struct link_ctx {
        engine::link_id id = 0;
        pn_link_t* link = nullptr;    // nullptr once Proton has freed it
        bool consumer = false;        // our sender, the client's receiver
        bool attached = false;        // the engine said yes; link open
        bool closed = false;          // detached locally or remotely
        bool anonymous = false;
        // producer side
        bool blocked = false;
        bool oversize = false;
        uint64_t presettled_refused = 0; // an anonymous link's: logged, not ended (refuse_presettled)
        std::string partial;          // a multi-frame delivery in progress
        struct awaited {
            pn_delivery_t* d;         // nullptr if pre-settled
            uint32_t index;           // the message's place in its batch (0: not a batch)
        };
        fifo<awaited> awaiting;       // sent to the engine, in order
        // A peer's relay sending batches (see relay_batch.hpp): the most
        // messages in one delivery (0: one each), and what each unsettled
        // batch still waits for.
        uint32_t batch = 0;
        // Its credit in messages (sent as control records, not as Proton's
        // credit, which counts deliveries): received so far, and the limit
        // granted, both over the link's life.
        uint64_t batch_in = 0;
        uint64_t batch_limit = 0;
        struct batch_outcome {
            uint32_t left = 0;        // messages without an outcome yet
            uint32_t answered = 0;    // its first messages that have one
            uint32_t told = 0;        // of those, told to the relay as accepted (prefix answers)
            uint64_t number = 0;      // the relay's number for it (its delivery tag)
            std::vector<relay::failure> failures;
        };
        std::unordered_map<pn_delivery_t*, batch_outcome> batches;
        std::vector<engine::incoming_message> to_publish;
        // consumer side
        uint64_t sent = 0;
        uint64_t next_tag = 0;
        // The client's credit as last passed on (to the engine, or to the
        // twin), as an absolute limit. Proton raises a link's flow event for
        // our own transfers too, and the same limit without drain says
        // nothing new: new_credit() takes the link's credit and says whether
        // it is worth passing on.
        uint64_t credit_said = 0;
        bool drain_said = false;
        bool new_credit() {
            const uint64_t limit = sent + static_cast<uint64_t>(std::max(0, pn_link_credit(link)));
            const bool drain = pn_link_get_drain(link);
            if (!drain && !drain_said && limit == credit_said) return false;
            credit_said = limit;
            drain_said = drain;
            return true;
        }
        std::vector<engine::settlement> to_settle;
        std::vector<engine::annotation_change> annotations; // for some of to_settle's modified outcomes
        std::vector<uint64_t> unsent;
        std::deque<engine::ev_deliver> held; // a browser's copies, waiting for credit
        uint64_t max_out = 0;         // the client's max-message-size (0: none)
        bool dirty = false;           // listed in dirty_links_
        std::optional<engine::command> pending_attach; // waiting for the resolvers
        std::string address;          // as attached (for resolvers and redirects)
        std::string forwarded_from;   // another node handing messages over (its id)
        bool management = false;      // a producer to $management: requests, not messages
        bool controls = false;        // a producer from a peer's relay to $wharf.relay-acks
        bool credits = false;         // a consumer: a peer's relay taking its producers' credit from $wharf.relay-credit
        // A peer's relay taking a consumer's messages in batches (see
        // relay_batch.hpp): its number for the link, and the delivery being
        // filled (nullptr: none) with how much it holds.
        uint64_t relay_link = 0;
        bool presettled_acks = false; // the relay settles pre-settled messages once it sent them
        bool prefix_answers = false;  // a relay's producer: tell it a waiting batch's accepted messages
        bool detach_answers = false;  // ... and answers before its detach when this side ends the link
        bool answers_due = false;     // ended here (a queue move): its cmd_detach waits for the relay's detach
        pn_delivery_t* out = nullptr;
        uint32_t out_count = 0;
        size_t out_bytes = 0;
        // relayed: the queue is at another node; its twin link there does the work
        bool relayed = false;
        std::shared_ptr<relay::mailbox> relay;         // the peer connection's inbox
        relay::unsettled_map relay_unsettled;
        std::deque<relay::message> relay_held; // pre-settled from the owner, waiting for credit
        bool owner_acks = false;      // the owner takes the relay's answers (relay_back)
        uint64_t relay_in = 0;        // transfers from the client (client sends)
        uint64_t relay_limit = 0;     // client sends: transfers the owner allows in all
        credit_budget::share producer_share; // producers, while open: their part of the node's (or the relay's) budget
        credit_pool::share pool;      // producers to a named queue: their part of the connection's credit
        uint64_t relay_ids = 0;       // numbers the client's transfers (see relay::message::id)
        // anonymous relay: a twin (null target) at each node that owns a `to`
        struct anon_twin {
            uint64_t relay = 0;
            std::shared_ptr<relay::mailbox> peer;
            relay::unsettled_map unsettled;
            uint64_t sent = 0;  // messages relayed to it
            uint64_t limit = 0; // what its owner takes in all (its flow: delivered + credit)
        };
        std::unordered_map<std::string, anon_twin> anon_twins; // by node id
        // anonymous relay: messages whose `to` the cluster is placing now
        struct held_message {
            pn_delivery_t* d;             // nullptr: pre-settled
            engine::incoming_message m;
        };
        std::deque<held_message> anon_held;
    };

    void on_link_open(pn_link_t* l);
    void on_link_flow(pn_link_t* l);
    void on_link_close(pn_link_t* l, bool closed);
    // relay_links.cpp: the client's side of relayed links.
    void relay_attach(link_ctx& lc, const plugins::resolution& r);
    void handle(relay::message& m);
    void relay_flow(link_ctx& lc);
    void relay_credit(link_ctx& lc);
    void relay_incoming(link_ctx& lc, pn_delivery_t* d);
    void relay_disposition(link_ctx& lc, pn_delivery_t* d);
    void relay_detach(link_ctx& lc, bool closed);
    void relay_ended(link_ctx& lc, const relay::condition& cond, bool closed);
    void relay_anonymous(link_ctx& lc, pn_delivery_t* d, const plugins::resolution& to, std::string bytes,
                         bool presettled);
    bool handle_anonymous(relay::message& m);
    void end_anon_twins(link_ctx& lc);
    static uint64_t anon_waiting(const link_ctx& lc);
    void forget_link(pn_link_t* l);
    void on_incoming(link_ctx& lc, pn_delivery_t* d);
    // The checks a whole message gets and its fields for the engine; the
    // error to refuse it with if it fails them. `to`: its properties.to.
    std::optional<error> admit(engine::message_ref body, bool too_big, bool presettled, engine::incoming_message& m,
                               std::optional<std::string>* to = nullptr);
    // batch_links.cpp: a peer's relay sending batches.
    void on_batch(link_ctx& lc, pn_delivery_t* d);
    void outcome_in_batch(link_ctx& lc, pn_delivery_t* d, uint32_t index, const error* failed);
    // While a relay's producer waits for room: which of each open batch's
    // first messages are stored (see relay_batch.hpp, prefix answers).
    void tell_accepted_prefixes(link_ctx& lc);
    void on_controls(link_ctx& lc, pn_delivery_t* d);
    void settle_controls();
    void top_up_batch_credit(link_ctx& lc);
    void send_credit_records();
    void batch_deliver(link_ctx& lc, engine::ev_deliver& ev);
    void batch_drained(link_ctx& lc);
    void open_out_batch(link_ctx& lc);
    void end_out_batch(link_ctx& lc);
    // A message's bytes as they go to the client (a redelivery's header says so).
    std::string_view wire_bytes(const engine::ev_deliver& ev);
    void on_management_request(link_ctx& lc, pn_delivery_t* d);
    void on_disposition(link_ctx& lc, pn_delivery_t* d);
    void on_transport_closed();

    void handle(engine::ev_attached& ev);
    void handle(engine::ev_deliver& ev);
    void handle(engine::ev_drained& ev);
    void handle(engine::ev_published& ev);
    void handle_events();
    void handle(engine::ev_flow_control& ev);
    void handle(engine::ev_detach& ev);
    void handle(connection_outbox::resolved& r);
    void send_held(link_ctx& lc);
    void settle_sent(link_ctx& lc, uint64_t seq);
    void relay_send(link_ctx& lc, relay::message& m);
    void relay_send_held(link_ctx& lc);
    void relay_back(link_ctx& lc, uint64_t id, engine::outcome_kind outcome);
    void relay_bye(link_ctx& lc, bool closed, relay::condition cond);
    void send_delivery(link_ctx& lc, engine::ev_deliver& ev);
    void resolve(link_ctx& lc, size_t resolver);
    // Where an anonymous-relay message goes.
    struct anon_route {
        enum { local, relay, refuse, unknown } kind = local;
        error err{errc::internal_error, {}};
        plugins::resolution to;       // relay
        size_t resolver = 0;          // unknown: the resolver that is finding out
    };
    anon_route route_anonymous(const std::string& to);
    // Why a management request's reply could not reach `reply_to`, if so.
    std::optional<error> unanswerable(const std::string& reply_to);
    bool is_own_consumer_address(const std::string& address) const;
    // Sends one anonymous-relay message where its `to` says; may_wait: hold it
    // while the cluster places an unknown address (else refuse it).
    void dispatch_anonymous(link_ctx& lc, pn_delivery_t* d, engine::incoming_message&& m, bool may_wait);
    void refuse_link(link_ctx& lc, const error& err, const plugins::resolution* redirect);
    bool refused_for_filters(link_ctx& lc, engine::cmd_attach_consumer& c);

    void detach_link(link_ctx& lc, bool answered = false);
    // A modified outcome's message-annotations (encoded; "" for none), and
    // why they are not valid (nullopt: they are).
    static std::string modified_annotations(pn_delivery_t* d, std::optional<amqp::codec_error>& bad);
    // Ends a consumer's link whose client sent annotations the spec does not
    // allow (after their outcome was applied without them).
    void end_for_bad_annotations(link_ctx& lc, const amqp::codec_error& why);
    bool gather(link_ctx& lc, pn_delivery_t* d, uint64_t max);
    // Conditions this connection sends fit its client's max-frame-size.
    void set_condition(pn_condition_t* c, errc code, std::string_view description) const {
        server::set_condition(c, code, description, condition_max_);
    }
    size_t condition_max_ = max_condition_description;
    // A consumer's credit of 2^31 or more ends its link (false).
    bool credit_countable(pn_link_t* l);
    // A transfer the peer had no right to send ends its link (false).
    bool transfer_allowed(link_ctx& lc, pn_delivery_t* d);
    // Whether a delivery of the peer's sits on a link where this node is
    // the sender; if so (true) the connection is closed, and nothing may be
    // sent on the link.
    bool foreign_delivery(link_ctx& lc);
    // Ends a link from this side with a condition.
    void end_link(link_ctx& lc, errc code, const std::string& description);
    // A pre-settled message the node could not take (see link_events.cpp).
    void refuse_presettled(link_ctx& lc, const error& err);
    void flush_link(link_ctx& lc);
    // Management's view of a link changed (attached, closed, relayed):
    // end_batch() updates that one entry.
    void mark_info(const link_ctx& lc) { info_dirty_.push_back(lc.id); }
    // Every way a link closes comes here (so does forget_link(), before it
    // frees one): what it held of the credit pool goes to the others.
    void mark_closed(link_ctx& lc) {
        lc.closed = true;
        mark_info(lc);
        pool_.leave(lc.pool);
        if (pool_.links() == 0) pool_member_.release(); // the other connections' pools grow
    }
    // A client's producer, local or relayed, takes its credit from the
    // connection's pool; the connection then counts among the node's pools.
    void join_pool(link_ctx& lc) {
        if (!pool_.enabled()) return;
        pool_.join(lc.pool);
        if (!pool_member_.held() && settings_.producers != nullptr)
            pool_member_ = credit_budget::share(*settings_.producers, credit_budget::kind::pool);
    }
    void mark_dirty(link_ctx& lc) {
        if (!lc.dirty) {
            lc.dirty = true;
            dirty_links_.push_back(lc.id);
        }
    }
    void top_up_credit(link_ctx& lc);
    // A producer link's window: credit-window, or its share of the node's
    // producer budget once many producers are open (see credit_budget).
    int64_t producer_window() const {
        return static_cast<int64_t>(settings_.producers != nullptr ? settings_.producers->window(settings_.credit_window)
                                                                    : settings_.credit_window);
    }
    // The pool's size now: the connection's budget, or its even share of
    // the node's producer budget among the connections with pools.
    void size_pool() {
        if (settings_.producers != nullptr)
            pool_.set_total(static_cast<int64_t>(settings_.producers->pool_part(settings_.connection_credit)));
    }
    // End of a batch: credit that came back to the pool goes to the links
    // waiting for it, in turn (see credit_pool); after a tick, idle links'
    // credit is forgiven first.
    void serve_credit_line();
    // The credit to add to a producer's link that holds `credit` (in
    // messages): none until it fell to `refill_at`, then back up to
    // `window`, but never more than `room` (what it may still be given).
    static int64_t refill(int64_t credit, int64_t window, int64_t refill_at,
                          int64_t room = std::numeric_limits<int64_t>::max()) {
        if (credit > refill_at) return 0;
        return std::max<int64_t>(0, std::min(window - credit, room));
    }
    void reject_now(pn_delivery_t* d, errc code, const std::string& description);
    link_ctx* find(engine::link_id id);
    static link_ctx* ctx_of(pn_link_t* l);

    pn_connection_t* conn_;
    const connection_settings& settings_;
    engine::queue_engine& engine_;
    std::atomic<uint64_t>& link_ids_;
    std::shared_ptr<connection_outbox> outbox_;
    std::unordered_map<engine::link_id, std::unique_ptr<link_ctx>> links_;
    std::vector<engine::link_id> dirty_links_; // links with commands to flush
    std::vector<engine::command> commands_;
    // control deliveries (a peer's relay-acks link) taken this batch, not yet settled
    std::vector<std::pair<engine::link_id, pn_delivery_t*>> controls_taken_;
    std::vector<engine::event> events_;
    // A sync's answer leaves in slices: each end_batch() settles at most
    // outcomes_per_turn outcomes of answers that waited for a sync, and the
    // rest of such an answer, with every event after it, waits here for the
    // next pass (this connection woke itself for it). Proton writes what a
    // batch settled when the batch ends, so a producer whose window one sync
    // answered gets the first slice sooner and sends again while the rest
    // are settled (docs/benchmarks.md, "Outcomes in slices"). Answers given
    // as the messages were read (nothing to sync) are not sliced: they come
    // a read at a time already. Nothing waits while the connection closes,
    // nor once more than max_deferred_outcomes wait: then all go at once.
    static constexpr uint32_t outcomes_per_turn = 128;
    static constexpr uint32_t max_deferred_outcomes = 1024;
    std::vector<engine::event> deferred_events_;
    uint32_t deferred_outcomes_ = 0; // outcomes in deferred_events_
    uint32_t outcome_budget_ = 0;
    std::vector<connection_outbox::resolved> resolutions_;
    std::shared_ptr<relay::mailbox> relay_inbox_;   // answers from peer connections
    relay::batch relay_out_;                         // to peer connections, posted at the batch's end
    std::vector<relay::message> relay_msgs_;
    // anonymous-relay twins: relay id -> (the client's link, the node)
    std::unordered_map<uint64_t, std::pair<engine::link_id, std::string>> anon_routes_;
    // a peer's relay: its numbers for the consumer links it takes in batches
    std::unordered_map<uint64_t, engine::link_id> relay_links_;
    // a peer's relay: the link its batch producers' credit goes on (0: none
    // yet), and the control records for it that wait for the batch's end
    engine::link_id credits_link_ = 0;
    std::string credits_out_;
    std::string scratch_;
    credit_pool pool_;
    credit_budget::share pool_member_;         // counts this connection among the node's pools while it has pooled links
    engine::link_id pool_turn_ = 0;            // the link serve_credit_line() is serving
    std::atomic<bool> pool_line_{false};       // links wait for credit: on_tick() wakes us
    std::atomic<bool> tick_due_{false};        // a tick came: forgive idle links' credit
    bool finished_ = false;
    bool refused_ = false;
    errc refuse_code_ = errc::resource_limit_exceeded;
    std::string refuse_description_;
    std::atomic<bool> shutdown_requested_{false};
    std::chrono::steady_clock::time_point open_deadline_ = std::chrono::steady_clock::time_point::max();
    std::chrono::milliseconds open_within_{0};
    std::atomic<bool> opened_{false};       // the client's open came
    std::atomic<bool> open_overdue_{false}; // on_tick() found it late: end_batch() drops the connection
    bool open_dropped_ = false;
    void drop_unopened();
    void check_open_deadline();
    // Whether the client's idle-time-out is one the node can keep (else the
    // connection is closed saying so).
    bool refuse_idle_timeout();
    // management's view, updated a link at a time as links come and go (a
    // whole rebuild per batch cost O(links) each time: O(n^2) for a client
    // attaching thousands of links on one connection)
    const uint64_t serial_;
    mutable std::mutex info_mu_;
    connection_info info_;                                    // links: unused, see info_links_
    std::map<engine::link_id, connection_info::link> info_links_; // under info_mu_
    bool info_stale_ = true;                                  // the connection's own fields
    std::vector<engine::link_id> info_dirty_;                 // links whose entry may have changed
    std::string close_reason_;        // under info_mu_: request_close
    void refresh_info();
    bool shutdown_done_ = false;
};

} // namespace wharf::server
