#include "client/detail/redirect_link.hpp"

#include "client/detail/client_state.hpp"
#include "client/detail/node_connection.hpp"
#include "client/detail/pn_bridge.hpp"

#include <proton/connection.hpp>
#include <proton/delivery.hpp>
#include <proton/tracker.hpp>

#include <exception>
#include <vector>

namespace wharf::client::detail {

namespace {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
}

} // namespace

redirect_link::redirect_link(const std::shared_ptr<client_state>& client, bool sender, std::string address,
                             link_handler& app, proton::sender_options sopts, proton::receiver_options ropts)
    : client_(client), sender_role_(sender), opened_address_(address), app_(app), sopts_(std::move(sopts)),
      ropts_(std::move(ropts)), max_redirects_(client->options.max_redirects),
      count_reset_(client->options.redirect_count_reset), attach_timeout_(client->options.attach_timeout),
      address_(std::move(address)) {
    sopts_.handler(*this);
    ropts_.handler(*this);
}

// ---- any thread ----------------------------------------------------------

void redirect_link::start(const endpoint& where) { move_to(where, "", ""); }

void redirect_link::request_close() {
    std::shared_ptr<node_connection> node;
    {
        std::lock_guard lock(mu_);
        if (closed_) return;
        closed_ = true;
        node = node_;
    }
    if (node) node->submit({[self = shared_from_this()](proton::connection&) { self->close_local(); },
                            [](const proton::error_condition&) {}});
}

bool redirect_link::post(proton::work f) {
    {
        std::lock_guard lock(mu_);
        if (closed_ || !node_) return false;
    }
    return dispatch(std::make_shared<proton::work>(std::move(f)));
}

// Runs f on the connection the link is on when f gets there; if the link has
// moved on meanwhile, f follows it.
bool redirect_link::dispatch(const std::shared_ptr<proton::work>& f) {
    std::shared_ptr<node_connection> node;
    {
        std::lock_guard lock(mu_);
        node = node_;
    }
    if (!node) return false;
    auto self = shared_from_this();
    return node->submit({[self, node, f](proton::connection&) {
                      bool here = false;
                      {
                          std::lock_guard lock(self->mu_);
                          here = self->node_ == node;
                      }
                      if (here) (*f)();
                      else self->dispatch(f);
                  },
                  [](const proton::error_condition&) {}});
}

std::string redirect_link::node_address() const {
    std::lock_guard lock(mu_);
    return node_ ? node_->key() : "";
}

bool redirect_link::mark_closed() {
    std::lock_guard lock(mu_);
    const bool was_open = !closed_;
    closed_ = true;
    return was_open;
}

// Hands the link to the connection to `where`, where attach() runs next. The
// last thing the calling thread does with this link.
void redirect_link::move_to(const endpoint& where, const std::string& vhost, const std::string& redirected_by) {
    auto client = client_.lock();
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::shared_ptr<node_connection> next = client ? client->node_for(where, vhost) : nullptr;
        std::uint64_t this_move = 0;
        {
            std::lock_guard lock(mu_);
            if (closed_) return;
            if (!next) {
                closed_ = true; // the client is closing: nothing more for this link
                return;
            }
            node_ = next;
            this_move = ++attempt_;
        }
        auto self = shared_from_this();
        const std::string target = where.key();
        const bool queued = next->submit(
            {[self, next](proton::connection& c) { self->attach(next, c); },
             [self, target, redirected_by](const proton::error_condition& why) {
                 self->unreachable(target, redirected_by, why);
             }});
        if (queued) {
            const std::weak_ptr<redirect_link> weak = self;
            client->timer.add(clock::now() + attach_timeout_, [weak, this_move, target] {
                if (auto l = weak.lock()) l->attach_timed_out(this_move, target);
            });
            return;
        }
        // That connection ended between node_for() and submit(): ask again.
    }
    fail(attach_failed, "queue '" + address_ + "': no connection to " + where.key() + " could be made");
}

// ---- the thread of the connection the link is on ------------------------------

void redirect_link::attach(const std::shared_ptr<node_connection>& node, proton::connection& c) {
    {
        std::lock_guard lock(mu_);
        if (closed_ || node_ != node) return;
    }
    try {
        proton::link l;
        if (sender_role_) {
            sender_ = c.open_sender(address_, sopts_);
            l = sender_;
        } else {
            receiver_ = c.open_receiver(address_, ropts_);
            l = receiver_;
        }
        // The attach frame goes out after this callback: the address can
        // still change. A redirect's address wins over the options'.
        if (redirected_) set_local_address(l, address_);
        else if (auto a = local_address(l); !a.empty()) address_ = a;
        current_.store(c_link(l), std::memory_order_relaxed);
    } catch (const std::exception& e) {
        fail(attach_failed, "queue '" + address_ + "': cannot attach at " + node->describe() + ": " + e.what());
        return;
    }
    node->link_arrived(this);
    on_node_ = true;
    open_ = false;
}

void redirect_link::unreachable(const std::string& target, const std::string& redirected_by,
                                const proton::error_condition& why) {
    if (!mark_closed()) return;
    if (redirected_by.empty()) {
        report(why); // the application's own url: its error as it is
        return;
    }
    report(proton::error_condition(redirect_unreachable, "queue '" + opened_address_ + "': " + redirected_by +
                                                              " redirected the link to " + target +
                                                              ", which cannot be reached (" + why.what() + ")"));
}

std::string redirect_link::timeout_text() const {
    const auto ms = attach_timeout_.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

// attach_timeout_ after move_to(): if the connection has not opened, give it
// up (its work fails, ours with it: unreachable() reports); if it has, see
// on its thread whether the attach was answered.
void redirect_link::attach_timed_out(std::uint64_t attempt, const std::string& target) {
    std::shared_ptr<node_connection> node;
    {
        std::lock_guard lock(mu_);
        if (closed_ || attempt != attempt_) return;
        node = node_;
    }
    if (!node) return;
    if (node->give_up_connecting(
            proton::error_condition(attach_failed, "no open from " + target + " within " + timeout_text())))
        return;
    auto self = shared_from_this();
    node->submit({[self, attempt, target](proton::connection&) { self->attach_unanswered(attempt, target); },
                  [](const proton::error_condition&) {}});
}

void redirect_link::attach_unanswered(std::uint64_t attempt, const std::string& target) {
    {
        std::lock_guard lock(mu_);
        if (closed_ || attempt != attempt_) return;
    }
    if (open_) return;
    const std::string what = "no attach from " + target + " within " + timeout_text();
    if (chain_.empty()) fail(attach_failed, "queue '" + opened_address_ + "': " + what);
    else
        fail(redirect_unreachable, "queue '" + opened_address_ + "': " + chain_.back() +
                                       " redirected the link to " + target + ", which cannot be reached (" + what +
                                       ")");
}

void redirect_link::close_local() {
    proton::link l = sender_role_ ? proton::link(sender_) : proton::link(receiver_);
    if (l && l.active() && !local_closed(l)) l.close();
}

void redirect_link::connection_lost(const proton::error_condition& why) {
    on_node_ = false; // the connection has forgotten us already
    current_.store(nullptr, std::memory_order_relaxed);
    sender_ = proton::sender();
    receiver_ = proton::receiver();
    if (!mark_closed() || why.empty()) return;
    report(why);
}

void redirect_link::leave_node() {
    if (on_node_) node_->link_left(this);
    on_node_ = false;
    current_.store(nullptr, std::memory_order_relaxed);
}

void redirect_link::fail(const char* name, const std::string& description) {
    proton::link l = sender_role_ ? proton::link(sender_) : proton::link(receiver_);
    if (l && !local_closed(l)) l.close();
    leave_node();
    sender_ = proton::sender();
    receiver_ = proton::receiver();
    if (mark_closed()) report(proton::error_condition(name, description));
}

void redirect_link::report(const proton::error_condition& e) {
    app_.on_link_failure(link_failure{sender_role_, opened_address_, e});
}

bool redirect_link::is_current(const proton::link& l) const {
    return c_link(l) == current_.load(std::memory_order_relaxed);
}

bool redirect_link::will_follow(const proton::link& l) const {
    if (!is_link_redirect(l.error()) || local_closed(l)) return false;
    std::lock_guard lock(mu_);
    return !closed_;
}

// The chain of redirects is not cleared here: a node that opens the link
// and redirects it at once would restart the count every time. follow()
// clears it when the link stayed open for redirect_count_reset.
void redirect_link::opened(const proton::link&) {
    open_ = true;
    opened_at_ = clock::now();
}

// The current link was detached (closing or not) by the peer.
void redirect_link::ended(proton::link& l, bool closing) {
    if (!is_current(l)) return;
    if (will_follow(l)) {
        follow(l);
        return;
    }
    leave_node();
    mark_closed();
    if (sender_role_) {
        proton::sender s = sender_;
        sender_ = proton::sender();
        if (closing) app_.on_sender_close(s);
        else app_.on_sender_detach(s);
    } else {
        proton::receiver r = receiver_;
        receiver_ = proton::receiver();
        if (closing) app_.on_receiver_close(r);
        else app_.on_receiver_detach(r);
    }
}

void redirect_link::follow(proton::link& l) {
    const proton::error_condition err = l.error();
    const std::string node_id = l.connection().container_id();
    const std::string here = node_->key();
    const std::string by = node_id.empty() ? here : node_id + " (" + here + ")";
    const bool established = open_;
    // A link that was open a while starts a new count; one bounced at once counts on.
    if (established && clock::now() - opened_at_ >= count_reset_) chain_.clear();
    chain_.push_back(by);

    std::string why;
    auto target = parse_redirect(err, &why);
    if (!target) {
        fail(bad_redirect, "queue '" + address_ + "': " + by + " sent amqp:link:redirect, but " + why +
                               " (\"" + err.description() + "\")");
        return;
    }
    target->where.scheme = node_->where().scheme;
    if (static_cast<int>(chain_.size()) > max_redirects_) {
        fail(too_many_redirects, "queue '" + opened_address_ + "': more than " + std::to_string(max_redirects_) +
                                     " redirects: " + join(chain_, " -> ") + " -> " + target->where.key() +
                                     "; a redirect loop?");
        return;
    }
    if (!sender_role_ && established) {
        // A refused attach never had credit of its own: keep what was saved.
        saved_credit_ = receiver_.credit();
        saved_drain_ = drain_requested(receiver_);
    }

    redirect_info info;
    info.sender = sender_role_;
    info.address = opened_address_;
    info.to_address = target->address.empty() ? address_ : target->address;
    info.from_node = node_id;
    info.from = here;
    info.to = target->where.key();
    info.description = err.description();
    info.established = established;
    info.hop = static_cast<int>(chain_.size());
    address_ = info.to_address;
    redirected_ = true;
    open_ = false;
    redirects_.fetch_add(1, std::memory_order_relaxed);
    // First the notice (the application lets go of the old link), then what
    // was in flight on it, so a re-send cannot go out on the old link.
    app_.on_redirect(info);
    if (sender_role_) hand_back_unsettled();
    leave_node();
    sender_ = proton::sender();
    receiver_ = proton::receiver();
    move_to(target->where, target->hostname != target->where.host ? target->hostname : "", by);
}

// Sender: what was sent and not settled will never get an outcome here.
void redirect_link::hand_back_unsettled() {
    pn_link_t* c = c_link(sender_);
    if (pn_link_snd_settle_mode(c) == PN_SND_SETTLED) return; // all pre-settled: at most once
    std::vector<pn_delivery_t*> in_flight;
    for (pn_delivery_t* d = pn_unsettled_head(c); d != nullptr; d = pn_unsettled_next(d))
        if (!pn_delivery_settled(d) && pn_delivery_remote_state(d) == 0) in_flight.push_back(d);
    for (pn_delivery_t* d : in_flight) {
        proton::tracker t = tracker_of(d);
        app_.on_tracker_unsettled_at_redirect(t);
        pn_delivery_settle(d);
    }
}

// ---- Proton events ---------------------------------------------------------
// Message, flow and disposition events are passed on without a check: a
// Proton link stops producing them once it is detached, which is when it stops
// being the current one.

void redirect_link::on_sender_open(proton::sender& s) {
    if (!is_current(s) || refused_attach(s)) return; // refused: the detach follows
    opened(s);
    app_.on_sender_open(s);
}
void redirect_link::on_sendable(proton::sender& s) { app_.on_sendable(s); }
void redirect_link::on_sender_drain_start(proton::sender& s) { app_.on_sender_drain_start(s); }
void redirect_link::on_sender_error(proton::sender& s) {
    if (is_current(s) && !will_follow(s)) app_.on_sender_error(s);
}
void redirect_link::on_sender_close(proton::sender& s) { ended(s, true); }
void redirect_link::on_sender_detach(proton::sender& s) { ended(s, false); }
void redirect_link::on_tracker_accept(proton::tracker& t) { app_.on_tracker_accept(t); }
void redirect_link::on_tracker_reject(proton::tracker& t) { app_.on_tracker_reject(t); }
void redirect_link::on_tracker_release(proton::tracker& t) { app_.on_tracker_release(t); }
void redirect_link::on_tracker_settle(proton::tracker& t) { app_.on_tracker_settle(t); }

void redirect_link::on_receiver_open(proton::receiver& r) {
    if (!is_current(r) || refused_attach(r)) return;
    opened(r);
    // Give the new link what the old one had: with a credit window Proton has
    // granted it already; with credit managed by the application, we do.
    if (saved_credit_ > r.credit()) r.add_credit(static_cast<uint32_t>(saved_credit_ - r.credit()));
    if (saved_drain_) {
        try {
            r.drain();
        } catch (const std::exception&) {
            // a drain cycle is already running
        }
    }
    saved_credit_ = 0;
    saved_drain_ = false;
    app_.on_receiver_open(r);
}
void redirect_link::on_message(proton::delivery& d, proton::message& m) { app_.on_message(d, m); }
void redirect_link::on_delivery_settle(proton::delivery& d) { app_.on_delivery_settle(d); }
void redirect_link::on_receiver_drain_finish(proton::receiver& r) { app_.on_receiver_drain_finish(r); }
void redirect_link::on_receiver_error(proton::receiver& r) {
    if (is_current(r) && !will_follow(r)) app_.on_receiver_error(r);
}
void redirect_link::on_receiver_close(proton::receiver& r) { ended(r, true); }
void redirect_link::on_receiver_detach(proton::receiver& r) { ended(r, false); }
void redirect_link::on_error(const proton::error_condition& e) { app_.on_error(e); }

} // namespace wharf::client::detail
