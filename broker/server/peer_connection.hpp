#pragma once
// peer_connection: a connection this node opened to another node to relay
// client links to the queues it owns. Each relayed link has a twin here,
// driven by relay messages from the client's connection and answering it
// the same way (see relay_protocol.hpp). To the owner the twin is an
// ordinary client link.
//
// Threads: like amqp_connection, one proactor thread at a time runs its
// event batches. When the connection ends, every twin's client link is
// detached with amqp:link:detach-forced naming the node.

#include "broker/server/connection_base.hpp"
#include "broker/server/relay_batch.hpp"
#include "broker/server/relay_protocol.hpp"

#include <proton/link.h>
#include <proton/session.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace wharf::server {

class relay_hub;

class peer_connection final : public connection_base {
  public:
    // Opens `c` (and a session); the server hands it to the proactor after.
    peer_connection(pn_connection_t* c, const std::string& own_node, std::string peer_node, relay_hub& hub);
    ~peer_connection() override;

    void on_event(pn_event_t* e) override;
    void end_batch() override;
    bool finished() const override { return finished_; }
    pn_connection_t* pn() const override { return conn_; }
    void request_shutdown() override;

    std::shared_ptr<relay::mailbox> inbox() const { return inbox_; }

  private:
    struct twin {
        uint64_t relay = 0;
        pn_link_t* link = nullptr;
        std::weak_ptr<relay::mailbox> reply;
        bool client_sends = false;
        bool opened = false;          // told the client side
        bool drain_asked = false;
        // Client receives, from an owner that takes the relay's answers
        // (relay_batch.hpp): the owner ended the link first (a queue move,
        // or any other reason) and reads the answers the client's side
        // gives before this end's detach (see on_remote_close).
        bool owner_acks = false;
        bool annotated_outcomes = false; // the owner takes a modified outcome's annotations in records
        bool remote_ended = false;
        bool remote_closed = false;
        uint64_t transfers = 0;       // received from the owner, or sent to it
        uint64_t told_limit = 0;      // client sends: the owner's limit the client side has
        uint64_t next_id = 0;         // numbers the owner's transfers (client receives)
        relay::unsettled_map unsettled;
        // client sends, in batches (see relay_batch.hpp): the most messages
        // in one delivery the owner agreed to (0: one each), the client's
        // messages waiting for the owner's credit, and the ids in each batch.
        // Client receives, in batches: the most messages in one delivery
        // the owner said it puts (0: one each).
        uint32_t batch = 0;
        // client sends, in batches: the owner sends its credit as control
        // records (see relay_batch.hpp), and the limit they gave (messages
        // over the link's life).
        bool credit_records = false;
        uint64_t limit = 0;
        bool queued = false;          // listed in to_send_
        std::vector<relay::message> pending;
        uint64_t batches = 0;         // deliveries sent (transfers counts messages)
        struct sent_batch {
            std::vector<uint64_t> ids; // the client's deliveries in it, in order
            uint32_t told = 0;         // its first ones already accepted (the owner's prefix answers)
        };
        std::unordered_map<uint64_t, sent_batch> batch_ids;
    };

    void handle(relay::message& m);
    // The owner's word that a batch's first `n` messages are stored.
    void on_accepted_prefix(twin& t, uint64_t batch, uint32_t n);
    void attach(relay::message& m);
    void on_remote_open(twin& t);
    void on_remote_close(twin& t, bool closed);
    void on_flow(twin& t);
    void on_delivery(twin& t, pn_delivery_t* d);
    void send_batches(twin& t);
    void on_batch_outcome(twin& t, pn_delivery_t* d);
    // A producer's credit: the owner's limit to its client's side, and the
    // link on which the owner sends it for batch producers.
    void tell_limit(twin& t);
    void open_credits();
    void on_credit_records(pn_delivery_t* d);
    void on_credits_ended(pn_link_t* l);
    // The consumer direction (see relay_batch.hpp): batches from the owner,
    // and control records (credit, outcomes) to it on one link.
    void on_consumer_batch(twin& t, pn_delivery_t* d);
    void add_control(const relay::control& c);
    void send_controls();
    void on_control_settled(pn_delivery_t* d);
    void detach_twin(twin& t, const relay::message& m);
    void tell(twin& t, relay::message&& m);
    void refuse_waiting(std::vector<relay::message>&& waiting, const std::string& why);
    void end_all(const std::string& why);
    // A twin the owner ended whose client's connection was gone: detached
    // with wharf:relay-answers-lost unless the client's detach came.
    void end_orphan(uint64_t relay);
    twin* find(uint64_t relay);

    // The context of a twin link this side detached: it is freed when the
    // owner's detach comes back (Proton keeps a link until it is freed).
    static inline char ended_here = 0;

    pn_connection_t* conn_;
    const std::string peer_node_;
    relay_hub& hub_;
    // Relayed links spread over sessions of at most links_per_session:
    // Proton finds the link an attach (or its answer) names by comparing
    // names with every link of the session, so one session of N links costs
    // O(N²) to attach them. A session is ended once its last link is freed
    // (unless it is the one new links go to).
    static constexpr size_t links_per_session = 128;
    pn_session_t* session_ = nullptr;        // where new links go
    std::unordered_map<pn_session_t*, size_t> session_links_; // links not yet freed
    pn_session_t* session_for_link();
    void free_link(pn_link_t* l);
    std::shared_ptr<relay::mailbox> inbox_;
    std::vector<relay::message> msgs_;
    std::vector<uint64_t> to_send_;          // twins with pending messages, by relay id
    relay::batch out_;                       // to clients' connections, posted at the batch's end
    std::unordered_map<uint64_t, std::unique_ptr<twin>> twins_;
    // Control records to the owner: the link (opened with the first batch
    // consumer), what waits to go at the batch's end, deliveries sent and
    // settled by the owner (it settles them in order), and detaches that
    // wait for the owner to have taken the controls sent before them.
    static inline char controls_ctx = 0;
    pn_link_t* controls_ = nullptr;
    std::string controls_out_;
    uint64_t controls_sent_ = 0, controls_settled_ = 0;
    std::vector<std::pair<uint64_t, relay::message>> held_detaches_;
    std::vector<uint64_t> orphans_; // see end_orphan(), at the batch's end
    // Batch producers' credit from the owner (opened with the first one);
    // refused: the owner is from before credit records, do not ask again.
    static inline char credits_ctx = 0;
    pn_link_t* credits_ = nullptr;
    bool credits_refused_ = false;
    std::atomic<bool> shutdown_requested_{false};
    bool finished_ = false;
};

} // namespace wharf::server
