#include "tools/wharf-bench/link_clients.hpp"

#include "tools/wharf-bench/connection_client.hpp"

#include <proton/codec/encoder.hpp>
#include <proton/connection.hpp>
#include <proton/map.hpp>
#include <proton/source.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/error_condition.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>
#include <proton/session.hpp>
#include <proton/source_options.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>

#include <algorithm>
#include <bit>
#include <cstring>

namespace wharf::bench {

namespace {

proton::delivery_mode settle_mode(const bench_options& o) {
    return o.at_most_once ? proton::delivery_mode::AT_MOST_ONCE : proton::delivery_mode::AT_LEAST_ONCE;
}

void put_u64(unsigned char* p, std::uint64_t v) { std::memcpy(p, &v, sizeof v); }

std::uint64_t get_u64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

// ---- guarded_handler ----

void guarded_handler::report(const std::string& where, const proton::error_condition& e) {
    if (closing()) return;
    std::string text = where + ": " + (e.name().empty() ? std::string("(no condition)") : e.name());
    if (!e.description().empty()) text += ": " + e.description();
    run_.fail(text);
}

void guarded_handler::on_error(const proton::error_condition& e) { report("error", e); }
void guarded_handler::on_transport_error(proton::transport& t) { report("transport", t.error()); }
void guarded_handler::on_connection_error(proton::connection& c) { report("connection", c.error()); }
void guarded_handler::on_session_error(proton::session& s) { report("session", s.error()); }
void guarded_handler::on_sender_error(proton::sender& s) {
    report("sender link to '" + s.target().address() + "'", s.error());
}
void guarded_handler::on_receiver_error(proton::receiver& r) {
    report("receiver link from '" + r.source().address() + "'", r.error());
}
void guarded_handler::on_link_failure(const wharf::client::link_failure& f) {
    report(std::string(f.sender ? "sender link to '" : "receiver link from '") + f.address + "'", f.condition);
}

// ---- sender_client ----

sender_client::sender_client(run_control& run, connection_client& owner, int link_index, std::uint64_t quota)
    : guarded_handler(run), owner_(owner), link_index_(link_index), quota_(quota),
      pre_settled_(run.options().at_most_once), stamp_body_(run.options().end_to_end()),
      one_at_a_time_(run.options().mode == bench_mode::latency),
      time_accepts_(run.options().mode == bench_mode::send && !run.options().at_most_once),
      loss_possible_(run.options().mode == bench_mode::latency && run.options().at_most_once),
      in_flight_(static_cast<std::uint64_t>(run.options().in_flight)),
      body_(run.options().size, static_cast<std::uint8_t>('w')), tag_(sizeof(std::uint64_t), 0) {
    // The id names the sending link, so a receiver in latency mode can tell
    // which link pair a message belongs to. Set once, never per message.
    message_.id(static_cast<std::uint64_t>(link_index));
    // pair/latency: the receivers count only the messages of this run.
    if (stamp_body_) message_.correlation_id(run.run_id());
    message_.durable(run.options().durable);
    for (const auto& [name, value] : run.options().properties) message_.properties().put(name, value);
    message_.body(body_);
    if (time_accepts_) {
        const auto slots = std::bit_ceil(2 * in_flight_);
        send_times_.assign(slots, 0);
        send_seqs_.assign(slots, UINT64_MAX);
        ring_mask_ = slots - 1;
    }
}

bool sender_client::closing() const { return owner_.closing(); }

void sender_client::open(wharf::client::cluster_client& client) {
    const auto& o = run_.options();
    auto link = client.open_sender(o.url, o.queue_for(link_index_), *this,
                                   proton::sender_options()
                                       .delivery_mode(settle_mode(o))
                                       .target(proton::target_options().address(o.queue_for(link_index_))));
    std::lock_guard lock(link_mutex_);
    link_ = std::move(link);
}

bool sender_client::post(proton::work f) {
    wharf::client::link_ref link;
    {
        std::lock_guard lock(link_mutex_);
        link = link_;
    }
    return link.post(std::move(f));
}

void sender_client::poke() {
    post([this] { pump(); });
}

void sender_client::on_sender_open(proton::sender& s) {
    if (attached_ns_.load(std::memory_order_relaxed) == 0) {
        const std::uint64_t now = now_ns();
        attached_ns_.store(now, std::memory_order_release);
        run_.link_attached(true, now);
    }
    sender_ = s;
    queue_.store(&s.work_queue(), std::memory_order_release);
    pump();
}

// The old link belongs to the old connection: let go of it here. What was in
// flight on it comes back as released (the library's default), not re-sent.
void sender_client::on_redirect(const wharf::client::redirect_info&) {
    sender_ = proton::sender();
    queue_.store(nullptr, std::memory_order_release);
}

void sender_client::request_send(std::uint64_t sent_at) {
    if (sent_at != last_sent_at_) return;  // a receipt for a message already given up
    send_wanted_ = true;
    pump();
}

// Latency mode, at-most-once: a pre-settled message may be lost, and its
// receipt never come. After --drain-idle without one the pair goes on (the
// message counts as lost: sent, never received), so the run can end.
void sender_client::arm_loss_timer(std::uint64_t after_ns) {
    if (loss_timer_armed_ || !sender_) return;
    loss_timer_armed_ = true;
    // The timer runs on this connection's thread; the check goes to the
    // link's thread, wherever the link is by then.
    sender_.work_queue().schedule(proton::duration(static_cast<proton::duration::numeric_type>(after_ns / 1'000'000 + 1)),
                                  [this] { post([this] { check_lost(); }); });
}

void sender_client::check_lost() {
    loss_timer_armed_ = false;
    if (send_wanted_ || closing()) return;
    const std::uint64_t idle_ns = static_cast<std::uint64_t>(run_.options().drain_idle * 1e9);
    const std::uint64_t waited = now_ns() - last_sent_at_;
    if (waited < idle_ns) {
        arm_loss_timer(idle_ns - waited);
        return;
    }
    send_wanted_ = true;
    pump();
}

void sender_client::on_sendable(proton::sender&) { pump(); }

void sender_client::pump() {
    if (sender_ && !closing()) {
        while (sender_.credit() > 0 && sent_ < quota_ && !run_.stop_sending()) {
            if (!pre_settled_ && sent_ - settled_ >= in_flight_) break;
            if (one_at_a_time_ && !send_wanted_) break;
            send_one();
        }
    }
    if ((sent_ >= quota_ || run_.stop_sending() || closing()) && settled_ == sent_ &&
        !finished_.load(std::memory_order_relaxed)) {
        finished_.store(true, std::memory_order_release);
        run_.sender_finished();
    }
}

void sender_client::send_one() {
    const std::uint64_t now = now_ns();
    if (stamp_body_) {
        put_u64(reinterpret_cast<unsigned char*>(body_.data()), now);
        message_.body(body_);
    }
    put_u64(reinterpret_cast<unsigned char*>(tag_.data()), sent_);
    if (time_accepts_) {
        send_times_[sent_ & ring_mask_] = now;
        send_seqs_[sent_ & ring_mask_] = sent_;
    }
    sender_.send(message_, tag_);
    ++sent_;
    send_wanted_ = false;
    last_sent_at_ = now;
    if (loss_possible_) arm_loss_timer(static_cast<std::uint64_t>(run_.options().drain_idle * 1e9));
    link_counters& counters = run_.counters();
    link_counters::bump(counters.sent);
    if (pre_settled_) {
        ++settled_;
        link_counters::bump(counters.settled);
    }
    counters.last_progress_ns.store(now, std::memory_order_relaxed);
}

void sender_client::record_accept_latency(const proton::tracker& t) {
    const proton::binary tag = t.tag();
    if (tag.size() != sizeof(std::uint64_t)) return;
    const std::uint64_t seq = get_u64(reinterpret_cast<const unsigned char*>(tag.data()));
    const auto slot = seq & ring_mask_;
    if (send_seqs_[slot] != seq) return;
    const std::uint64_t now = now_ns();
    run_.accept_latency().record(now - send_times_[slot]);
    send_seqs_[slot] = UINT64_MAX;
}

void sender_client::on_tracker_accept(proton::tracker& t) {
    link_counters::bump(run_.counters().accepted);
    if (time_accepts_) record_accept_latency(t);
}

// A rejected or released message will not arrive: in latency mode the pair
// sends its next one now instead of waiting for a receipt that never comes.
void sender_client::on_tracker_reject(proton::tracker&) {
    link_counters::bump(run_.counters().rejected);
    if (one_at_a_time_) send_wanted_ = true;
}

void sender_client::on_tracker_release(proton::tracker&) {
    link_counters::bump(run_.counters().released);
    if (one_at_a_time_) send_wanted_ = true;
}

void sender_client::on_tracker_settle(proton::tracker&) {
    if (pre_settled_) return;  // already counted at send
    ++settled_;
    link_counters& counters = run_.counters();
    link_counters::bump(counters.settled);
    counters.last_progress_ns.store(now_ns(), std::memory_order_relaxed);
    pump();
}

void sender_client::on_sender_close(proton::sender& s) {
    if (!closing() && !run_.failed())
        run_.fail("sender link to '" + s.target().address() + "' closed by the peer");
}

void sender_client::on_sender_detach(proton::sender& s) {
    if (!closing() && !run_.failed())
        run_.fail("sender link to '" + s.target().address() + "' detached by the peer");
}

// ---- receiver_client ----

receiver_client::receiver_client(run_control& run, connection_client& owner, int link_index,
                                 const std::vector<sender_client*>& senders)
    : guarded_handler(run), owner_(owner), link_index_(link_index), senders_(senders),
      read_stamp_(run.options().end_to_end()),
      window_(static_cast<std::uint32_t>(run.options().credit)) {}

bool receiver_client::closing() const { return owner_.closing(); }

// The queue, with the selector as a filter (what Qpid JMS and rhea send).
proton::source_options receiver_client::source_for(const bench_options& o, int link_index) {
    auto src = proton::source_options().address(o.queue_for(link_index));
    if (o.selector.empty()) return src;
    proton::value described;
    proton::codec::encoder enc(described);
    enc << proton::codec::start::described() << uint64_t{0x0000468C00000004ULL} << o.selector
        << proton::codec::finish();
    proton::source::filter_map filters;
    filters.put(proton::symbol("jms-selector"), described);
    return src.filters(filters);
}

void receiver_client::open(wharf::client::cluster_client& client) {
    const auto& o = run_.options();
    proton::source_options source = source_for(o, link_index_);
    client.open_receiver(o.url, o.queue_for(link_index_), *this,
                         proton::receiver_options()
                             .credit_window(0)
                             .auto_accept(true)
                             .delivery_mode(settle_mode(o))
                             .source(source));
}

void receiver_client::accept_incoming(proton::receiver& r) {
    incoming_ = true;
    r.open(proton::receiver_options().handler(*this).credit_window(0).auto_accept(true));
    on_receiver_open(r);
}

void receiver_client::grant(std::uint32_t wanted) {
    const std::uint32_t granted = run_.take_credit(link_index_ % std::max(1, run_.options().queues), wanted);
    if (granted > 0 && receiver_) receiver_.add_credit(granted);
}

void receiver_client::on_receiver_open(proton::receiver& r) {
    receiver_ = r;
    // After a redirect the library has given the new link the credit the old
    // one had left: grant only at the first attach.
    if (attached_ns_.load(std::memory_order_relaxed) != 0) return;
    const std::uint64_t now = now_ns();
    attached_ns_.store(now, std::memory_order_release);
    run_.link_attached(false, now);
    grant(window_);
}

void receiver_client::on_redirect(const wharf::client::redirect_info&) { receiver_ = proton::receiver(); }

void receiver_client::on_message(proton::delivery& d, proton::message& m) {
    if (closing()) {
        if (!d.settled()) d.release();
        return;
    }
    const std::uint64_t now = now_ns();
    if (read_stamp_ && !of_this_run(m)) {
        // Left on the queue by an earlier run (or another producer): take it
        // off (auto-accept settles it) without timing or counting it.
        link_counters::bump(run_.counters().foreign);
        refill();
        return;
    }
    if (read_stamp_) {
        std::uint64_t sent_at = 0;
        const proton::value& body = m.body();
        if (body.type() == proton::BINARY) {
            const auto bytes = proton::get<proton::binary>(body);
            if (bytes.size() >= sizeof(std::uint64_t)) {
                sent_at = get_u64(reinterpret_cast<const unsigned char*>(bytes.data()));
                if (sent_at <= now) run_.e2e_latency().record(now - sent_at);
            }
        }
        if (run_.options().mode == bench_mode::latency) route_receipt(m, sent_at);
    }
    link_counters& counters = run_.counters();
    link_counters::bump(counters.received);
    counters.last_progress_ns.store(now, std::memory_order_relaxed);
    refill();
}

// Refill in batches: once half the window is used, give it back at once.
void receiver_client::refill() {
    if (++used_since_grant_ >= std::max<std::uint32_t>(1, window_ / 2)) {
        grant(used_since_grant_);
        used_since_grant_ = 0;
    }
}

bool receiver_client::of_this_run(const proton::message& m) const {
    const proton::message_id id = m.correlation_id();
    return id.type() == proton::ULONG && proton::get<std::uint64_t>(id) == run_.run_id();
}

// Latency mode: tell the sender of this message (named by the message id) to
// send its next one; it may live on another connection, whose thread this is not.
void receiver_client::route_receipt(const proton::message& m, std::uint64_t sent_at) {
    const proton::message_id id = m.id();
    if (id.type() != proton::ULONG) return;
    const auto index = proton::get<std::uint64_t>(id);
    if (index >= senders_.size()) return;
    sender_client* origin = senders_[index];
    if (origin->current_queue() == &receiver_.work_queue()) {
        origin->request_send(sent_at); // same connection: this thread
    } else if (!origin->post([origin, sent_at] { origin->request_send(sent_at); })) {
        // That link is gone; its pair is over.
    }
}

void receiver_client::on_receiver_close(proton::receiver& r) {
    if (incoming_ && !r.error()) return;  // the sender is done
    if (!closing() && !run_.failed())
        run_.fail("receiver link from '" + r.source().address() + "' closed by the peer");
}

void receiver_client::on_receiver_detach(proton::receiver& r) {
    if (incoming_ && !r.error()) return;
    if (!closing() && !run_.failed())
        run_.fail("receiver link from '" + r.source().address() + "' detached by the peer");
}

} // namespace wharf::bench
