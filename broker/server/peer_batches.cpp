// peer_connection: relay batches (see relay_batch.hpp). A relayed
// producer's messages go to the owner several to a delivery and come back
// with each one's outcome; a relayed consumer's come from the owner several
// to a delivery, and its credit and outcomes go back as control records.

#include "broker/server/peer_connection.hpp"
#include "broker/server/pn_util.hpp"
#include "broker/server/relay_batch.hpp"

#include <algorithm>

#include <proton/delivery.h>
#include <proton/disposition.h>
#include <spdlog/spdlog.h>

#include <cstring>

namespace wharf::server {

namespace {
using kind = relay::message::kind;
} // namespace

// The client's messages that wait, as many as the owner's credit allows
// (in messages: see on_flow), up to `batch` messages or max_batch_bytes in
// each delivery.
void peer_connection::send_batches(twin& t) {
    pn_link_t* l = t.link;
    size_t next = 0;
    std::string bytes;
    for (;;) {
        const int64_t allowed = t.credit_records ? static_cast<int64_t>(t.limit - t.transfers)
                                                 : static_cast<int64_t>(t.batches) + pn_link_credit(l) -
                                                       static_cast<int64_t>(t.transfers);
        if (next == t.pending.size() || allowed <= 0) break;
        const auto most = static_cast<size_t>(std::min<int64_t>(allowed, t.batch));
        bytes.clear();
        std::vector<uint64_t> ids;
        bool all_settled = true;
        while (next < t.pending.size() && ids.size() < most &&
               (ids.empty() || bytes.size() + t.pending[next].bytes.size() <= relay::max_batch_bytes)) {
            const relay::message& m = t.pending[next++];
            relay::append_record(bytes, m.settled, m.bytes);
            all_settled = all_settled && m.settled;
            ids.push_back(m.id);
        }
        const uint64_t number = ++t.batches;
        pn_delivery_t* d = pn_delivery(l, pn_dtag(reinterpret_cast<const char*>(&number), sizeof number));
        pn_link_send(l, bytes.data(), bytes.size());
        pn_link_advance(l);
        t.transfers += ids.size();
        if (all_settled) {
            pn_delivery_settle(d);
        } else {
            pn_delivery_set_context(d, reinterpret_cast<void*>(static_cast<uintptr_t>(number)));
            t.batch_ids.emplace(number, twin::sent_batch{std::move(ids), 0});
        }
    }
    t.pending.erase(t.pending.begin(), t.pending.begin() + static_cast<std::ptrdiff_t>(next));
}

// The owner's one outcome for a batch, as each message's outcome.
void peer_connection::on_batch_outcome(twin& t, pn_delivery_t* d) {
    const bool settled = pn_delivery_settled(d);
    auto it = t.batch_ids.find(relay::id_of(d));
    if (it == t.batch_ids.end()) {
        if (settled) pn_delivery_settle(d);
        return;
    }
    std::vector<relay::failure> failures;
    if (pn_delivery_remote_state(d) == PN_REJECTED)
        failures = relay::get_failures(pn_disposition_condition(pn_delivery_remote(d)));
    std::unordered_map<uint32_t, const relay::failure*> failed;
    for (const relay::failure& f : failures) failed.emplace(f.index, &f);
    const std::vector<uint64_t>& ids = it->second.ids;
    for (uint32_t i = it->second.told; i < ids.size(); ++i) { // (the first `told` were answered already)
        relay::message m;
        m.what = kind::disposition;
        m.id = ids[i];
        m.settled = settled;
        if (failures.empty()) {
            relay::capture_state(m, d); // one state for all: accepted, released, modified, ...
        } else if (auto f = failed.find(i); f != failed.end()) {
            m.state = PN_REJECTED;
            m.x().st.type = PN_REJECTED;
            m.x().st.cond = {f->second->name, f->second->description, {}};
        } else {
            m.state = PN_ACCEPTED;
        }
        tell(t, std::move(m));
    }
    pn_delivery_clear(d);
    if (settled) {
        pn_delivery_settle(d);
        t.batch_ids.erase(it);
    }
}

// The owner's limit for a producer's twin (messages over the link's life)
// to the client's side, when it changed: from its credit records, or
// (without them: one message a delivery) deliveries so far + Proton's credit.
void peer_connection::tell_limit(twin& t) {
    if (!t.opened) return;
    uint64_t limit = t.limit;
    if (!t.credit_records) {
        // What the owner granted in all: Proton's sender credit goes below
        // zero by what waits here beyond it (an anonymous twin's messages
        // are sent whether or not the owner has credit for them), so it is
        // not clamped: the limit then says how far behind the owner is.
        const int64_t sent = static_cast<int64_t>(t.batch != 0 ? t.batches : t.transfers);
        limit = static_cast<uint64_t>(std::max<int64_t>(0, sent + pn_link_credit(t.link)));
    }
    if (limit == t.told_limit) return;
    t.told_limit = limit;
    relay::message m;
    m.what = kind::flow;
    m.limit = limit;
    tell(t, std::move(m));
}

void peer_connection::open_credits() {
    if (credits_ != nullptr || credits_refused_) return;
    credits_ = pn_receiver(session_for_link(), "wharf-relay-credit");
    const std::string address(relay::credit_address);
    pn_terminus_set_address(pn_link_source(credits_), address.c_str());
    pn_link_set_context(credits_, &credits_ctx);
    pn_link_open(credits_);
    pn_link_flow(credits_, relay::batch_link_deliveries);
}

// The owner's credit records for batch producers.
void peer_connection::on_credit_records(pn_delivery_t* d) {
    std::string bytes;
    if (!take_whole(d, bytes)) return;
    pn_delivery_settle(d);
    if (const int credit = pn_link_credit(credits_); credit < relay::batch_link_deliveries / 2)
        pn_link_flow(credits_, relay::batch_link_deliveries - credit);
    std::vector<relay::control> records;
    if (!relay::parse_controls(bytes, records)) {
        spdlog::warn("node {} sent malformed credit records", peer_node_);
        return end_all("node " + peer_node_ + " sent malformed credit records");
    }
    for (const relay::control& c : records) {
        twin* t = find(c.link);
        if (t != nullptr && t->client_sends && c.what == relay::control::accepted) {
            on_accepted_prefix(*t, c.value, c.arg);
            continue;
        }
        if (t == nullptr || !t->client_sends || c.what != relay::control::credit || c.value <= t->limit) continue;
        t->limit = c.value; // (kept if it comes before the attach's answer)
        if (!t->credit_records) continue;
        send_batches(*t);
        tell_limit(*t);
    }
}

void peer_connection::on_accepted_prefix(twin& t, uint64_t batch, uint32_t n) {
    auto it = t.batch_ids.find(batch);
    if (it == t.batch_ids.end()) return; // answered whole meanwhile
    twin::sent_batch& b = it->second;
    n = std::min<uint32_t>(n, static_cast<uint32_t>(b.ids.size()));
    for (; b.told < n; ++b.told) {
        relay::message m;
        m.what = kind::disposition;
        m.id = b.ids[b.told];
        m.settled = true;
        m.state = PN_ACCEPTED;
        tell(t, std::move(m));
    }
}

// The owner ended the credit link: refused it (it is from before credit
// records; its twins count credit the old way), or closed it, and the batch
// producers that took their credit from it cannot go on.
void peer_connection::on_credits_ended(pn_link_t* l) {
    const relay::condition c = relay::capture(pn_link_remote_condition(l));
    pn_link_set_context(l, nullptr);
    if (!(pn_link_state(l) & PN_LOCAL_CLOSED)) pn_link_close(l);
    free_link(l);
    credits_ = nullptr;
    credits_refused_ = true;
    bool in_use = false;
    for (const auto& [id, t] : twins_) in_use = in_use || t->credit_records;
    if (!in_use) return;
    spdlog::warn("node {} ended the relay's credit link: {} {}", peer_node_, c.name, c.description);
    end_all("node " + peer_node_ + " ended the relay's credit link" + (c.set() ? ": " + c.description : ""));
}

// ---- the consumer direction ----

// Messages from the owner for the client, as transfers to its connection.
void peer_connection::on_consumer_batch(twin& t, pn_delivery_t* d) {
    pn_link_t* l = t.link;
    std::string bytes;
    if (!take_whole(d, bytes)) return;
    pn_delivery_settle(d);
    if (const int credit = pn_link_credit(l); credit < relay::batch_link_deliveries / 2)
        pn_link_flow(l, relay::batch_link_deliveries - credit);
    std::vector<relay::delivery_record> records;
    if (!relay::parse_deliveries(bytes, records)) {
        spdlog::warn("node {} sent a malformed batch on relayed link {}", peer_node_, pn_link_name(l));
        const relay::condition why{std::string(to_condition(errc::decode_error)),
                                   "node " + peer_node_ + " sent a malformed relay batch", {}};
        relay::message to_client, to_owner;
        to_client.what = to_owner.what = kind::detach;
        to_client.x().cond = to_owner.x().cond = why;
        tell(t, std::move(to_client));
        detach_twin(t, to_owner);
        return;
    }
    const std::shared_ptr<relay::mailbox> reply = t.reply.lock();
    for (const relay::delivery_record& r : records) {
        relay::message m;
        m.relay = t.relay;
        if ((r.flags & relay::drained) != 0) {
            m.what = kind::drained;
        } else {
            m.what = kind::transfer;
            m.id = r.seq; // the outcome names it (see add_control)
            m.tag.assign(reinterpret_cast<const char*>(&r.seq), sizeof r.seq);
            m.settled = (r.flags & relay::presettled) != 0;
            m.bytes.assign(r.bytes);
            ++t.transfers;
        }
        out_.add(reply, std::move(m));
    }
}

void peer_connection::add_control(const relay::control& c) { relay::append_control(controls_out_, c); }

// What the batch gathered goes to the owner as one delivery.
void peer_connection::send_controls() {
    if (controls_out_.empty() || controls_ == nullptr) return;
    const uint64_t number = ++controls_sent_;
    pn_delivery_t* d = pn_delivery(controls_, pn_dtag(reinterpret_cast<const char*>(&number), sizeof number));
    pn_link_send(controls_, controls_out_.data(), controls_out_.size());
    pn_link_advance(controls_);
    pn_delivery_set_context(d, reinterpret_cast<void*>(static_cast<uintptr_t>(number)));
    controls_out_.clear();
}

// The owner took a control delivery (and every one before it): the detaches
// that waited for it go now.
void peer_connection::on_control_settled(pn_delivery_t* d) {
    if (!pn_delivery_settled(d)) return;
    controls_settled_ = std::max<uint64_t>(controls_settled_, relay::id_of(d));
    pn_delivery_settle(d);
    size_t kept = 0;
    for (auto& held : held_detaches_) {
        if (held.first > controls_settled_) {
            held_detaches_[kept++] = std::move(held);
            continue;
        }
        if (twin* t = find(held.second.relay)) detach_twin(*t, held.second);
    }
    held_detaches_.resize(kept);
}

} // namespace wharf::server
