#pragma once
// The Proton handlers of one benchmark connection's links, opened through
// the wharf_client library (client/), which follows link redirects:
//   guarded_handler  - base of every handler here: reports each error Proton
//                      or the library raises to run_control instead of letting
//                      the default throw.
//   sender_client    - one sending link: pre-built message, bounded in-flight.
//   receiver_client  - one receiving link: credit granted in batches.
// connection_client (connection_client.hpp) owns them. A link's callbacks run
// on the thread of the connection it is on — after a redirect, the library's
// connection to the node that serves the queue. What they do is counted in
// run_control, per thread.

#include "tools/wharf-bench/run_control.hpp"

#include "client/cluster_client.hpp"

#include <proton/binary.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/source_options.hpp>
#include <proton/work_queue.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace wharf::bench {

class connection_client;

class guarded_handler : public wharf::client::link_handler {
public:
    explicit guarded_handler(run_control& run) : run_(run) {}

protected:
    // True once our side started closing: errors and peer closes after that
    // are part of the shutdown, not a failure.
    virtual bool closing() const = 0;
    void report(const std::string& where, const proton::error_condition& e);

    void on_error(const proton::error_condition& e) override;
    void on_transport_error(proton::transport& t) override;
    void on_connection_error(proton::connection& c) override;
    void on_session_error(proton::session& s) override;
    void on_sender_error(proton::sender& s) override;
    void on_receiver_error(proton::receiver& r) override;
    void on_link_failure(const wharf::client::link_failure& f) override;

    run_control& run_;
};

class sender_client : public guarded_handler {
public:
    // quota: messages this link sends (UINT64_MAX: until told to stop).
    sender_client(run_control& run, connection_client& owner, int link_index, std::uint64_t quota);

    void open(wharf::client::cluster_client& client);
    // Latency mode: our message sent at `sent_at` (its body's stamp) has
    // arrived; send the next one. A receipt for an older message (one given
    // up as lost) is ignored. On this link's thread.
    void request_send(std::uint64_t sent_at);
    // Runs f on this link's thread. False if the link is gone. Any thread.
    bool post(proton::work f);
    // Re-checks whether this link is done (after the stop flag was set). Any thread.
    void poke();
    // The work queue of the connection the link is on now (nullptr: none).
    // A receiver on the same connection may call request_send() directly.
    const proton::work_queue* current_queue() const { return queue_.load(std::memory_order_acquire); }

    bool finished() const { return finished_.load(std::memory_order_acquire); }
    // When the link was first attached (0: not yet).
    std::uint64_t attached_ns() const { return attached_ns_.load(std::memory_order_acquire); }

private:
    bool closing() const override;
    void on_sender_open(proton::sender& s) override;
    void on_redirect(const wharf::client::redirect_info& r) override;
    void on_sendable(proton::sender& s) override;
    void on_tracker_accept(proton::tracker& t) override;
    void on_tracker_reject(proton::tracker& t) override;
    void on_tracker_release(proton::tracker& t) override;
    void on_tracker_settle(proton::tracker& t) override;
    void on_sender_close(proton::sender& s) override;
    void on_sender_detach(proton::sender& s) override;

    void pump();
    void send_one();
    void arm_loss_timer(std::uint64_t after_ns);
    void check_lost();
    void record_accept_latency(const proton::tracker& t);

    connection_client& owner_;
    const int link_index_;
    const std::uint64_t quota_;
    const bool pre_settled_;
    const bool stamp_body_;      // pair/latency: body starts with the send time
    const bool one_at_a_time_;   // latency mode
    const bool time_accepts_;    // send mode, at-least-once
    const bool loss_possible_;   // latency mode, at-most-once: a message may never arrive
    const std::uint64_t in_flight_;
    std::mutex link_mutex_;  // link_ is set on a container thread, used from any
    wharf::client::link_ref link_;
    std::atomic<const proton::work_queue*> queue_{nullptr};
    proton::sender sender_;  // the current link (set on open, dropped on redirect)
    proton::message message_;
    proton::binary body_;
    proton::binary tag_;
    std::uint64_t sent_ = 0;
    std::uint64_t settled_ = 0;
    bool send_wanted_ = true;    // latency mode: the previous message has arrived
    std::uint64_t last_sent_at_ = 0;  // latency mode: the stamp of the message in flight
    bool loss_timer_armed_ = false;
    // Send time by delivery sequence, slot = seq & mask; the seq is stored too
    // so a slot reused before its accept came back is not misread.
    std::vector<std::uint64_t> send_times_;
    std::vector<std::uint64_t> send_seqs_;
    std::uint64_t ring_mask_ = 0;
    std::atomic<bool> finished_{false};
    std::atomic<std::uint64_t> attached_ns_{0};
};

class receiver_client : public guarded_handler {
public:
    // senders: every sender of the run by link index, for latency mode routing
    // (a message's id is the index of the sender that sent it).
    receiver_client(run_control& run, connection_client& owner, int link_index,
                    const std::vector<sender_client*>& senders);

    void open(wharf::client::cluster_client& client);
    static proton::source_options source_for(const bench_options& o, int link_index);
    // receive --listen: takes a link a peer attached (on its connection's
    // thread); its events come here from now on, and the peer closing it is
    // the end of its run, not an error.
    void accept_incoming(proton::receiver& r);

    bool attached() const { return attached_ns_.load(std::memory_order_acquire) != 0; }
    // When the peer attached the link (0: not yet).
    std::uint64_t attached_ns() const { return attached_ns_.load(std::memory_order_acquire); }

private:
    bool closing() const override;
    void on_receiver_open(proton::receiver& r) override;
    void on_redirect(const wharf::client::redirect_info& r) override;
    void on_message(proton::delivery& d, proton::message& m) override;
    void on_receiver_close(proton::receiver& r) override;
    void on_receiver_detach(proton::receiver& r) override;

    void grant(std::uint32_t wanted);
    void refill();  // one more message taken: give credit back in batches
    bool of_this_run(const proton::message& m) const;
    void route_receipt(const proton::message& m, std::uint64_t sent_at);

    connection_client& owner_;
    const int link_index_;
    const std::vector<sender_client*>& senders_;
    const bool read_stamp_;
    const std::uint32_t window_;
    proton::receiver receiver_;  // the current link (set on open, dropped on redirect)
    bool incoming_ = false;      // attached by a peer (--listen)
    std::uint32_t used_since_grant_ = 0;
    std::atomic<std::uint64_t> attached_ns_{0};
};

} // namespace wharf::bench
