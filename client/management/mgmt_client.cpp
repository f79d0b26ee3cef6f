#include "client/management/mgmt_client.hpp"

#include "client/cluster_client.hpp"
#include "client/detail/pn_bridge.hpp"

#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/tracker.hpp>
#include <proton/types.hpp>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace wharf::mgmt {

namespace {

using clock = std::chrono::steady_clock;

std::string id_text(const proton::message_id& id) {
    return id.type() == proton::STRING ? proton::get<std::string>(id) : proton::to_string(id);
}

std::string text_of(const proton::scalar& s) {
    return s.type() == proton::STRING ? proton::get<std::string>(s) : proton::to_string(s);
}

// The links' and the container's handler. Proton callbacks run on the
// container thread; the caller's thread waits on mu_/cv_ for what they set.
class mgmt_handler final : public client::link_handler {
  public:
    explicit mgmt_handler(std::string broker) : broker_(std::move(broker)) {}

    std::mutex mu;
    std::condition_variable cv;
    // under mu
    std::string reply_to;
    bool sender_open = false;
    bool closing = false;
    std::optional<std::string> unreachable_why, refused_why;
    std::map<std::string, proton::message> replies;
    std::map<std::string, std::string> rejected; // request id -> the node's condition
    client::link_ref sender_ref;

    client::cluster_client* client = nullptr; // set before the container runs

    // The connection's thread: sends m now, or once the sender is open.
    void send(const proton::message& m) {
        if (sender_ && sender_.active()) in_flight_[sender_.send(m)] = id_text(m.id());
        else pending_.push_back(m);
    }

  private:
    void on_container_start(proton::container&) override {
        auto r = client->open_receiver(broker_, "", *this,
                                       proton::receiver_options()
                                           .source(proton::source_options().dynamic(true))
                                           .credit_window(50));
        auto s = client->open_sender(broker_, "$management", *this);
        std::lock_guard l(mu);
        sender_ref = s;
    }
    void on_receiver_open(proton::receiver& r) override {
        std::lock_guard l(mu);
        reply_to = r.source().address();
        if (reply_to.empty()) refused_why = "the node gave the dynamic reply link no address";
        cv.notify_all();
    }
    void on_sender_open(proton::sender& s) override {
        sender_ = s;
        for (auto& m : pending_) in_flight_[sender_.send(m)] = id_text(m.id());
        pending_.clear();
        std::lock_guard l(mu);
        sender_open = true;
        cv.notify_all();
    }
    void on_redirect(const client::redirect_info& r) override {
        if (r.sender) sender_ = proton::sender();
    }
    // The node refused the request itself: no answer will come.
    void on_tracker_reject(proton::tracker& t) override {
        pn_condition_t* c = pn_disposition_condition(pn_delivery_remote(client::detail::c_delivery(t)));
        std::string why = pn_condition_is_set(c) ? pn_condition_get_name(c) : "rejected";
        if (const char* d = pn_condition_get_description(c); pn_condition_is_set(c) && d != nullptr && *d != 0)
            why += std::string(": ") + d;
        unanswered(t, std::move(why));
    }
    // Nor when it gave the request back without running it (released, or
    // modified: Proton reports both here).
    void on_tracker_release(proton::tracker& t) override {
        const bool modified = pn_delivery_remote_state(client::detail::c_delivery(t)) == PN_MODIFIED;
        unanswered(t, std::string(modified ? "amqp:modified" : "amqp:released") +
                          ": the node did not run it (sending it again is safe)");
    }
    // In flight when the link to $management moved to another node: it may
    // have run there (the library would call it released).
    void on_tracker_unsettled_at_redirect(proton::tracker& t) override {
        unanswered(t, "the link to $management moved to another node before the node answered: the request "
                      "may or may not have run");
    }
    void unanswered(proton::tracker& t, std::string why) {
        const auto it = in_flight_.find(t);
        if (it == in_flight_.end()) return;
        std::lock_guard l(mu);
        rejected[it->second] = std::move(why);
        in_flight_.erase(it);
        cv.notify_all();
    }
    void on_tracker_settle(proton::tracker& t) override { in_flight_.erase(t); }
    void on_message(proton::delivery&, proton::message& m) override {
        std::lock_guard l(mu);
        replies[id_text(m.correlation_id())] = m;
        cv.notify_all();
    }
    void on_sender_error(proton::sender& s) override { refuse(s.error()); }
    void on_receiver_error(proton::receiver& r) override { refuse(r.error()); }
    void on_sender_close(proton::sender&) override { lost("the node detached the link to $management"); }
    void on_receiver_close(proton::receiver&) override { lost("the node detached the reply link"); }
    void on_link_failure(const client::link_failure& f) override { lost(f.condition.what()); }
    void on_error(const proton::error_condition& e) override { lost(e.what()); }

    void refuse(const proton::error_condition& e) {
        std::lock_guard l(mu);
        if (!refused_why) refused_why = "the node refused a management link: " + e.what();
        cv.notify_all();
    }
    void lost(const std::string& why) {
        std::lock_guard l(mu);
        if (!closing && !unreachable_why && !refused_why) unreachable_why = why;
        cv.notify_all();
    }

    const std::string broker_;
    proton::sender sender_;                 // connection thread
    std::deque<proton::message> pending_;   // connection thread
    std::map<proton::tracker, std::string> in_flight_; // connection thread: sent, not settled
};

std::string seconds(std::chrono::milliseconds t) {
    const auto ms = t.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

} // namespace

struct mgmt_client::impl {
    explicit impl(const std::string& broker) : handler(broker), container(handler, "wharfctl") {
        client = std::make_unique<client::cluster_client>(container);
        handler.client = client.get();
    }
    ~impl() {
        {
            std::lock_guard l(handler.mu);
            handler.closing = true;
        }
        bool was_open = false; // a connection still connecting is not waited for
        for (const auto& c : client->connections()) was_open = was_open || c.open;
        if (client->close() > 0 && was_open) {
            std::unique_lock l(mu);
            cv.wait_for(l, std::chrono::seconds(2), [this] { return done; });
        }
        container.stop(); // a connection still connecting, or a peer that does not answer the close
        if (runner.joinable()) runner.join();
    }

    mgmt_handler handler;
    std::unique_ptr<client::cluster_client> client; // outlives the container, which calls into it
    proton::container container;
    std::thread runner;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false; // under mu: container.run() returned
    int next_id = 0;   // the caller's thread
};

mgmt_client::mgmt_client(const std::string& broker, std::chrono::milliseconds timeout)
    : broker_(broker), timeout_(timeout), impl_(std::make_unique<impl>(broker)) {
    impl* p = impl_.get();
    p->runner = std::thread([p] {
        try {
            p->container.run();
        } catch (const std::exception& e) {
            std::lock_guard l(p->handler.mu);
            if (!p->handler.unreachable_why) p->handler.unreachable_why = std::string("container: ") + e.what();
            p->handler.cv.notify_all();
        }
        {
            std::lock_guard l(p->mu);
            p->done = true;
        }
        p->cv.notify_all();
    });
    auto& h = p->handler;
    std::unique_lock l(h.mu);
    const bool ready = h.cv.wait_until(l, clock::now() + timeout_, [&] {
        return (!h.reply_to.empty() && h.sender_open) || h.unreachable_why || h.refused_why;
    });
    if (h.refused_why) throw refused(*h.refused_why);
    if (h.unreachable_why) throw unreachable("cannot reach " + broker_ + ": " + *h.unreachable_why);
    if (!ready) throw unreachable("cannot reach " + broker_ + ": no connection within " + seconds(timeout_));
}

mgmt_client::~mgmt_client() = default;

mgmt_reply mgmt_client::call(const mgmt_request& r) {
    auto& h = impl_->handler;
    const std::string id = "wharfctl-" + std::to_string(++impl_->next_id);
    proton::message m;
    m.id(id);
    m.to("$management");
    m.durable(false);
    for (const auto& [k, v] : r.properties) m.properties().put(k, v);
    if (r.body) m.body(*r.body);
    client::link_ref sender;
    {
        std::lock_guard l(h.mu);
        m.reply_to(h.reply_to);
        sender = h.sender_ref;
    }
    mgmt_handler* hp = &h;
    if (!sender.post([hp, m] { hp->send(m); })) throw unreachable("lost the connection to " + broker_);

    std::unique_lock l(h.mu);
    h.cv.wait_until(l, clock::now() + timeout_, [&] {
        return h.replies.count(id) != 0 || h.rejected.count(id) != 0 || h.unreachable_why || h.refused_why;
    });
    if (auto rej = h.rejected.find(id); rej != h.rejected.end()) {
        const std::string why = rej->second;
        h.rejected.erase(rej);
        throw refused(broker_ + " refused the request: " + why);
    }
    auto it = h.replies.find(id);
    if (it == h.replies.end()) {
        if (h.refused_why) throw refused(*h.refused_why);
        if (h.unreachable_why) throw unreachable("lost the connection to " + broker_ + ": " + *h.unreachable_why);
        throw unreachable("no answer from " + broker_ + " within " + seconds(timeout_));
    }
    proton::message reply = std::move(it->second);
    h.replies.erase(it);
    l.unlock();

    mgmt_reply out;
    const auto& props = reply.properties();
    if (props.exists("statusCode")) out.status = static_cast<int>(proton::coerce<int64_t>(props.get("statusCode")));
    if (props.exists("statusDescription")) out.description = text_of(props.get("statusDescription"));
    if (props.exists("count")) out.count = proton::coerce<int64_t>(props.get("count"));
    out.body = from_amqp(reply.body());
    return out;
}

std::string mgmt_client::node_id() const {
    for (const auto& c : impl_->client->connections())
        if (!c.node_id.empty()) return c.node_id;
    return "";
}

} // namespace wharf::mgmt
