// amqp_connection: link attach/detach, producer transfers, and the
// engine's answers to them (the consumer side is in consumer_links.cpp).

#include "broker/amqp/message_codec.hpp"
#include "broker/common/names.hpp"
#include "broker/management/management_service.hpp"
#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"
#include "broker/server/source_filter.hpp"

#include <proton/disposition.h>
#include <proton/session.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace wharf::server {

namespace {
int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}
} // namespace

void amqp_connection::on_link_open(pn_link_t* l) {
    auto lc = std::make_unique<link_ctx>();
    lc->id = link_ids_.fetch_add(1, std::memory_order_relaxed) + 1;
    lc->link = l;
    lc->consumer = pn_link_is_sender(l);
    pn_link_set_context(l, lc.get());
    pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
    pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
    if (!settings_.resolvers.empty())
        lc->forwarded_from = remote_link_property(l, plugins::forwarded_from_property);

    if (lc->consumer) {
        pn_terminus_t* src = pn_link_remote_source(l);
        pn_link_set_snd_settle_mode(l, pn_link_remote_snd_settle_mode(l));
        engine::cmd_attach_consumer c;
        c.link = lc->id;
        c.dynamic = pn_terminus_is_dynamic(src);
        c.address = terminus_address(src);
        c.browse = pn_terminus_get_distribution_mode(src) == PN_DIST_MODE_COPY;
        c.settle_on_send = pn_link_remote_snd_settle_mode(l) == PN_SND_SETTLED;
        c.out = outbox_;
        lc->address = c.address;
        lc->relay_link = relay::relay_link(l);
        lc->max_out = pn_link_remote_max_message_size(l);
        lc->presettled_acks = lc->relay_link != 0 && relay::presettled_acks(l);
        lc->detach_answers = lc->presettled_acks && relay::presettled_detach_answers(l);
        if (c.address == relay::credit_address) {
            // A peer's relay taking its producers' credit (batch_links.cpp):
            // no queue behind this link.
            lc->credits = true;
            lc->attached = true;
            pn_link_set_snd_settle_mode(l, PN_SND_SETTLED);
            pn_link_open(l);
            credits_link_ = lc->id;
            const engine::link_id id = lc->id;
            links_.emplace(id, std::move(lc));
            return;
        }
        if (!c.dynamic && !c.address.empty() && !settings_.resolvers.empty()) {
            lc->pending_attach = std::move(c);
            link_ctx& ref = *lc;
            links_.emplace(ref.id, std::move(lc));
            resolve(ref, 0);
            return;
        }
        engine::link_id id = lc->id;
        link_ctx& ref = *lc;
        links_.emplace(id, std::move(lc));
        if (!refused_for_filters(ref, c)) commands_.push_back(std::move(c));
        return;
    } else {
        pn_terminus_t* tgt = pn_link_remote_target(l);
        pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
        pn_link_set_max_message_size(l, settings_.max_message_size);
        engine::cmd_attach_producer c;
        c.link = lc->id;
        c.address = terminus_address(tgt);
        c.out = outbox_;
        lc->anonymous = c.address.empty();
        const bool coordinator = pn_terminus_get_type(tgt) == PN_COORDINATOR;
        if (pn_terminus_is_dynamic(tgt) || coordinator) {
            // (A coordinator has no address: taken for an anonymous producer,
            // a transaction's declare would be refused for want of a `to`.)
            engine::link_id id = lc->id;
            links_.emplace(id, std::move(lc));
            engine::ev_attached refusal{
                id,
                error{errc::not_implemented,
                      coordinator ? "transactions are not supported (the target is a coordinator, AMQP 1.0 §4); "
                                    "send and settle without a transaction"
                                  : "dynamic targets are not supported; attach to a named queue or use a null "
                                    "target (anonymous relay)"},
                {}};
            handle(refusal);
            return;
        }
        lc->address = c.address;
        lc->relay_link = relay::relay_link(l);
        const bool controls = c.address == relay::acks_address;
        if ((c.address == "$management" && settings_.management != nullptr) || controls) {
            // Requests to the management node, or a peer's relay answering
            // for its consumers: no queue behind this link.
            lc->management = !controls;
            lc->controls = controls;
            lc->attached = true;
            pn_link_open(l);
            link_ctx& ref = *lc;
            links_.emplace(ref.id, std::move(lc));
            top_up_credit(ref);
            return;
        }
        if (!c.address.empty() && !settings_.resolvers.empty()) {
            lc->pending_attach = std::move(c);
            link_ctx& ref = *lc;
            links_.emplace(ref.id, std::move(lc));
            resolve(ref, 0);
            return;
        }
        commands_.push_back(std::move(c));
    }
    engine::link_id id = lc->id;
    links_.emplace(id, std::move(lc));
}

// Asks resolver `index` of the chain; its answer comes back through the
// outbox (on this connection's thread), whichever thread gives it.
void amqp_connection::resolve(link_ctx& lc, size_t index) {
    if (index >= settings_.resolvers.size()) {
        if (auto* c = std::get_if<engine::cmd_attach_consumer>(&*lc.pending_attach); c && refused_for_filters(lc, *c))
            return;
        commands_.push_back(std::move(*lc.pending_attach));
        lc.pending_attach.reset();
        // Credit the client gave while the attach was being resolved.
        if (lc.consumer && lc.link != nullptr) {
            if (lc.new_credit()) commands_.push_back(engine::cmd_credit{lc.id, lc.credit_said, lc.drain_said});
        }
        return;
    }
    if (index == 0) {
        // A name no queue can have is refused before the cluster is asked
        // (as the engine refuses it): placing it first left an owner record
        // of a queue no link could ever use.
        if (auto why = check_queue_name(lc.address)) {
            refuse_link(lc, error{errc::invalid_field, "the address: " + *why}, nullptr);
            return;
        }
    }
    std::weak_ptr<connection_outbox> out = outbox_;
    const engine::link_id id = lc.id;
    const plugins::attach_request request{lc.address, !lc.consumer, lc.forwarded_from};
    settings_.resolvers[index]->resolve(request, [out, id, index](plugins::resolution r) {
        if (auto o = out.lock()) o->deliver_resolution({id, index, std::move(r)});
    });
}

void amqp_connection::handle(connection_outbox::resolved& r) {
    link_ctx* lc = find(r.link);
    if (!r.anon_to.empty()) {
        // The address of held anonymous-relay messages is placed now.
        if (lc == nullptr || lc->closed || lc->link == nullptr) return;
        std::deque<link_ctx::held_message> still;
        std::deque<link_ctx::held_message> ready;
        for (auto& h : lc->anon_held) (h.m.to == r.anon_to ? ready : still).push_back(std::move(h));
        lc->anon_held.swap(still);
        for (auto& h : ready) {
            if (r.r.what != plugins::resolution::kind::refuse) {
                dispatch_anonymous(*lc, h.d, std::move(h.m), false);
            } else if (h.d != nullptr) { // the cluster's own reason (the store unreachable: try again)
                reject_now(h.d, r.r.err.code, r.r.err.description);
            } else {
                refuse_presettled(*lc, r.r.err);
            }
        }
        top_up_credit(*lc); // what waited for the placement no longer holds the producer back
        return;
    }
    if (lc == nullptr || lc->closed || lc->link == nullptr || !lc->pending_attach) return;
    switch (r.r.what) {
    case plugins::resolution::kind::pass:
        resolve(*lc, r.resolver + 1);
        break;
    case plugins::resolution::kind::local:
        resolve(*lc, settings_.resolvers.size()); // attach to the local queue engine
        break;
    case plugins::resolution::kind::redirect: {
        error err{errc::redirect,
                  "queue '" + lc->address + "' is on node " + r.r.node_id + " at " + r.r.host + ":" +
                      std::to_string(r.r.port) + "; attach there"};
        refuse_link(*lc, err, &r.r);
        break;
    }
    case plugins::resolution::kind::refuse:
        refuse_link(*lc, r.r.err, nullptr);
        break;
    case plugins::resolution::kind::relay:
        relay_attach(*lc, r.r);
        break;
    }
}

// A consumer about to attach to a queue of this node takes its source's
// JMS selector (the answer's source, copied from the attach, says it is in
// place), or is refused (source_filter.hpp). A relaying node passes the
// filter on, and the owner decides.
bool amqp_connection::refused_for_filters(link_ctx& lc, engine::cmd_attach_consumer& c) {
    if (lc.link == nullptr) return false;
    source_filter f = read_source_filter(pn_terminus_filter(pn_link_remote_source(lc.link)));
    if (!f.refusal) {
        c.selector = std::move(f.selector);
        return false;
    }
    engine::ev_attached refusal{lc.id, std::move(*f.refusal), {}};
    handle(refusal);
    return true;
}

void amqp_connection::refuse_link(link_ctx& lc, const error& err, const plugins::resolution* redirect) {
    lc.pending_attach.reset();
    pn_link_t* l = lc.link;
    pn_terminus_set_type(lc.consumer ? pn_link_source(l) : pn_link_target(l), PN_UNSPECIFIED);
    pn_link_open(l);
    pn_condition_t* cond = pn_link_condition(l);
    set_condition(cond, err.code, err.description);
    if (redirect != nullptr)
        put_redirect_info(cond, redirect->host, redirect->port,
                          redirect->address.empty() ? lc.address : redirect->address);
    pn_link_close(l);
    mark_closed(lc);
}

void amqp_connection::handle(engine::ev_attached& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr || lc->closed || lc->link == nullptr) return;
    pn_link_t* l = lc->link;
    if (ev.err) {
        // Refuse: answer the attach with a null terminus, then detach with the reason.
        refuse_link(*lc, *ev.err, nullptr);
        return;
    }
    if (lc->consumer && pn_terminus_is_dynamic(pn_link_source(l)))
        pn_terminus_set_address(pn_link_source(l), ev.address.c_str());
    // A peer's relay offering batches, to or from a queue here: take them (a
    // producer's only with its credit as control records, on the relay's
    // link for them; see relay_batch.hpp).
    const link_ctx* credits = find(credits_link_);
    const bool records = credits != nullptr && !credits->closed && lc->relay_link != 0 && relay::credit_records(l);
    if (lc->consumer ? lc->relay_link != 0 : !lc->anonymous && records)
        if (const uint32_t n = relay::batch_size(l); n != 0) {
            lc->batch = std::min(n, relay::max_batch);
            lc->prefix_answers = !lc->consumer && relay::prefix_answers(l);
            relay::offer_batch(l, lc->batch, 0, !lc->consumer,
                               lc->consumer && lc->presettled_acks ? relay::presettled_acks_value : "",
                               lc->consumer && relay::annotated_outcomes(l), lc->prefix_answers);
            if (lc->consumer) relay_links_[lc->relay_link] = lc->id;
        }
    pn_link_open(l);
    lc->attached = true;
    if (!lc->consumer) {
        if (settings_.producers != nullptr) lc->producer_share = credit_budget::share(*settings_.producers);
        // A client's producer to a named queue takes its credit from the
        // connection's pool (a peer's batches and anonymous links do not).
        if (lc->batch == 0 && !lc->anonymous) join_pool(*lc);
        top_up_credit(*lc);
    }
}

void amqp_connection::on_link_flow(pn_link_t* l) {
    link_ctx* lc = ctx_of(l);
    if (lc == nullptr || !lc->consumer || lc->closed || lc->pending_attach || lc->credits) return;
    if (lc->relayed) {
        relay_send_held(*lc);
        return relay_flow(*lc);
    }
    if (lc->batch != 0) return; // the relay's credit comes as control records
    send_held(*lc);
    if (lc->new_credit()) commands_.push_back(engine::cmd_credit{lc->id, lc->credit_said, lc->drain_said});
}

// `answered`: the link's peer detached it, having answered every
// pre-settled message it passed on (see cmd_detach::presettled_sent).
void amqp_connection::detach_link(link_ctx& lc, bool answered) {
    if (lc.relayed) {
        relay_detach(lc, true);
        return;
    }
    end_anon_twins(lc);
    lc.anon_held.clear(); // their deliveries end with the link
    if (lc.out != nullptr && lc.link != nullptr) end_out_batch(lc);
    flush_link(lc);
    engine::cmd_detach c{lc.id, {}};
    c.all_sent = lc.consumer && lc.batch != 0;
    c.presettled_sent = lc.presettled_acks && lc.batch != 0 && !answered;
    if (lc.consumer && lc.link != nullptr) {
        for (pn_delivery_t* d = pn_unsettled_head(lc.link); d != nullptr; d = pn_unsettled_next(d)) {
            auto seq = reinterpret_cast<uintptr_t>(pn_delivery_get_context(d));
            if (seq != 0) c.sent_unsettled.push_back(seq);
        }
    }
    commands_.push_back(std::move(c));
    mark_closed(lc);
    lc.awaiting.clear();
    lc.batches.clear();
    lc.producer_share.release();
}

void amqp_connection::end_link(link_ctx& lc, errc code, const std::string& description) {
    if (lc.closed || lc.link == nullptr) return;
    pn_link_t* l = lc.link;
    detach_link(lc);
    set_condition(pn_link_condition(l), code, description);
    pn_link_close(l);
}

// A pre-settled message the node could not take (too large, malformed, no
// such queue, a full queue that rejects): its sender gets no outcome, so it
// must not go unseen. A link to one queue ends with the condition (AMQP has
// message-size-exceeded end the link; the client learns, and may attach
// again). An anonymous link goes on, as its other addresses may be fine:
// the node logs its first refusal, then each time the count doubles.
void amqp_connection::refuse_presettled(link_ctx& lc, const error& err) {
    if (!lc.anonymous) {
        end_link(lc, err.code, "a pre-settled message was refused: " + err.description);
        return;
    }
    const uint64_t n = ++lc.presettled_refused;
    if ((n & (n - 1)) == 0)
        spdlog::warn("anonymous link {}: refused a pre-settled message ({} so far on the link): {}: {}",
                     lc.link != nullptr ? pn_link_name(lc.link) : "", n, to_condition(err.code), err.description);
}

void amqp_connection::on_link_close(pn_link_t* l, bool closed) {
    link_ctx* lc = ctx_of(l);
    if (lc != nullptr && !lc->closed && lc->relayed) relay_detach(*lc, closed);
    if (lc != nullptr && !lc->closed) {
        const char* cond = pn_condition_get_name(pn_link_remote_condition(l));
        detach_link(*lc, cond == nullptr || std::strcmp(cond, relay::answers_lost_condition) != 0);
    }
    if ((pn_link_state(l) & PN_LOCAL_CLOSED) == 0) { // (not when this end began)
        if (closed) pn_link_close(l);
        else pn_link_detach(l);
    }
    // Both ends have detached now (whoever began), so nothing more happens
    // on the link: free it. Proton keeps every link of a session until it is
    // freed, and finds an attach's link by name among all of them, so a
    // long-lived connection with links coming and going (a peer connection
    // above all) would otherwise grow in memory and in attach time for good.
    forget_link(l);
    pn_link_free(l);
}

// The link's state goes; later events for it find no context and are ignored.
void amqp_connection::forget_link(pn_link_t* l) {
    link_ctx* lc = ctx_of(l);
    if (lc == nullptr) return;
    pn_link_set_context(l, nullptr);
    if (!lc->closed) detach_link(*lc);
    flush_link(*lc);
    if (auto it = relay_links_.find(lc->relay_link); it != relay_links_.end() && it->second == lc->id)
        relay_links_.erase(it);
    if (credits_link_ == lc->id) credits_link_ = 0;
    links_.erase(lc->id);
}

// ---- producers -----------------------------------------------------------

void amqp_connection::reject_now(pn_delivery_t* d, errc code, const std::string& description) {
    set_condition(pn_disposition_condition(pn_delivery_local(d)), code, description);
    pn_delivery_update(d, PN_REJECTED);
    pn_delivery_settle(d);
}

// Appends what has come of `d` to lc.partial, or, once the whole is larger
// than `max`, reads and drops it (lc.oversize); true once `d` is whole.
bool amqp_connection::gather(link_ctx& lc, pn_delivery_t* d, uint64_t max) {
    const size_t pending = pn_delivery_pending(d);
    if (!lc.oversize) {
        const size_t old = lc.partial.size();
        lc.partial.resize(old + pending);
        pn_link_recv(lc.link, lc.partial.data() + old, pending);
        if (lc.partial.size() > max) {
            lc.oversize = true;
            lc.partial.clear();
            lc.partial.shrink_to_fit();
        }
    } else {
        std::string sink(pending, '\0');
        pn_link_recv(lc.link, sink.data(), pending);
    }
    return !pn_delivery_partial(d);
}

void amqp_connection::on_incoming(link_ctx& lc, pn_delivery_t* d) {
    if (lc.management) return on_management_request(lc, d);
    if (lc.controls) return on_controls(lc, d);
    if (lc.batch != 0) return on_batch(lc, d);
    pn_link_t* l = lc.link;
    if (l == nullptr || !pn_delivery_readable(d)) return;
    if (pn_delivery_aborted(d)) {
        // It spent a credit (the settle advances the link) and brought no
        // message: the top-up gives it back.
        lc.partial.clear();
        lc.oversize = false;
        pn_delivery_settle(d);
        top_up_credit(lc);
        return;
    }
    const uint64_t max = settings_.max_message_size;
    const size_t pending = pn_delivery_pending(d);
    engine::message_ref body;
    size_t total = 0;
    if (pn_delivery_partial(d) || !lc.partial.empty() || lc.oversize) {
        // A multi-frame message: gather it (or, once too large, count and discard).
        if (!gather(lc, d, max)) return;
        total = lc.oversize ? max + 1 : lc.partial.size();
        if (!lc.oversize) body = engine::message_ref::copy_of(lc.partial);
        lc.partial.clear();
    } else {
        total = pending;
        if (total <= max) {
            body = engine::message_ref::allocate(pending);
            pn_link_recv(l, body.data(), pending);
        } else {
            std::string sink(pending, '\0');
            pn_link_recv(l, sink.data(), pending);
        }
    }
    pn_link_advance(l);
    const bool presettled = pn_delivery_settled(d);
    const bool too_big = lc.oversize || total > max;
    lc.oversize = false;
    engine::incoming_message m;
    std::optional<std::string> to;
    if (auto err = admit(std::move(body), too_big, presettled, m, &to)) {
        if (!presettled) {
            reject_now(d, err->code, err->description);
            top_up_credit(lc);
            return;
        }
        pn_delivery_settle(d);
        refuse_presettled(lc, *err);
        if (!lc.closed) top_up_credit(lc);
        return;
    }
    if (lc.anonymous && to) {
        m.to = std::move(*to);
        if (presettled) pn_delivery_settle(d);
        dispatch_anonymous(lc, presettled ? nullptr : d, std::move(m), true);
        top_up_credit(lc);
        return;
    }
    mark_dirty(lc);
    lc.to_publish.push_back(std::move(m));
    if (presettled) pn_delivery_settle(d);
    lc.awaiting.push_back({presettled ? nullptr : d, 0});
    top_up_credit(lc);
}

std::optional<error> amqp_connection::admit(engine::message_ref body, bool too_big, bool presettled,
                                            engine::incoming_message& m, std::optional<std::string>* to) {
    if (too_big)
        return error{errc::message_size_exceeded, "message is larger than this link's max-message-size of " +
                                                      std::to_string(settings_.max_message_size) + " bytes"};
    auto info = amqp::scan_message(body.bytes());
    if (!info) return error{errc::decode_error, "message is not valid AMQP: " + info.error().description};
    m.body = std::move(body);
    m.delivery_count = info->header.delivery_count;
    m.settled = presettled;
    m.durable = info->header.durable;
    if (info->header.ttl_ms) m.expiry_ms = wall_clock_ms() + *info->header.ttl_ms;
    if (info->absolute_expiry_ms && *info->absolute_expiry_ms > 0 &&
        (m.expiry_ms == 0 || *info->absolute_expiry_ms < m.expiry_ms))
        m.expiry_ms = *info->absolute_expiry_ms;
    if (to != nullptr) *to = std::move(info->to);
    return std::nullopt;
}

void amqp_connection::handle(engine::ev_published& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr || lc->closed) return;
    size_t next_failure = 0;
    for (uint32_t i = 0; i < ev.count && !lc->awaiting.empty(); ++i) {
        const auto [d, index] = lc->awaiting.front();
        lc->awaiting.pop_front();
        const bool failed = next_failure < ev.failures.size() && ev.failures[next_failure].index == i;
        const error* err = failed ? &ev.failures[next_failure++].err : nullptr;
        if (d == nullptr) {
            if (err != nullptr) refuse_presettled(*lc, *err); // may end the link (and clear awaiting)
            continue;
        }
        if (lc->batch != 0) {
            outcome_in_batch(*lc, d, index, err);
        } else if (err != nullptr) {
            reject_now(d, err->code, err->description);
        } else {
            pn_delivery_update(d, PN_ACCEPTED);
            pn_delivery_settle(d);
        }
    }
}

void amqp_connection::handle(engine::ev_flow_control& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr) return;
    lc->blocked = ev.blocked;
    if (!ev.blocked) top_up_credit(*lc);
    else if (lc->batch != 0) tell_accepted_prefixes(*lc); // what the held batches stored so far
}

// The engine ended the link (its queue moved or went). With `report`, the
// engine keeps what the link holds unsettled until this connection's
// cmd_detach says what the client got. Every delivery the engine staged
// before this event has been written or answered `unsent` by now, so the
// detach goes at once; unless the link is a relay's batch link for an
// at-most-once consumer, whose relay answers for what it passed on (and
// returns what it held for want of credit) before its own detach: the
// cmd_detach then waits for that detach (on_link_close), or for the
// connection's end (forget_link: unanswered counts as sent).
void amqp_connection::handle(engine::ev_detach& ev) {
    link_ctx* lc = find(ev.link);
    if (lc == nullptr || lc->closed || lc->link == nullptr || lc->answers_due) return;
    pn_link_t* l = lc->link;
    if (lc->out != nullptr) end_out_batch(*lc); // its messages go before the detach
    if (ev.report && lc->detach_answers && lc->batch != 0) lc->answers_due = true;
    else if (ev.report) detach_link(*lc, !(lc->presettled_acks && lc->batch != 0)); // an older relay answers no more
    else mark_closed(*lc);
    set_condition(pn_link_condition(l), ev.err.code, ev.err.description);
    if (ev.redirect) put_redirect_info(pn_link_condition(l), ev.redirect->host, ev.redirect->port, lc->address);
    pn_link_close(l);
}

} // namespace wharf::server
