#include "broker/server/tests/test_client.hpp"

#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/target.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

#include <atomic>
#include <deque>
#include <map>

namespace wharf::server::test {

namespace {

// The C object behind a Proton C++ wrapper. Proton keeps pn_object()
// protected; a derived copy of the wrapper may call it on itself.
template <class Wrapper> struct pn_access : Wrapper {
    explicit pn_access(const Wrapper& w) : Wrapper(w) {}
    auto get() const { return this->pn_object(); }
};
pn_delivery_t* pn_of(const proton::transfer& t) { return pn_access<proton::transfer>(t).get(); }
pn_link_t* pn_of(const proton::link& l) { return pn_access<proton::link>(l).get(); }

std::optional<amqp_error> to_error(const proton::error_condition& c) {
    if (c.empty()) return std::nullopt;
    return amqp_error{c.name(), c.description()};
}

std::optional<amqp_error> to_error(pn_condition_t* c) {
    if (c == nullptr || !pn_condition_is_set(c)) return std::nullopt;
    const char* n = pn_condition_get_name(c);
    const char* d = pn_condition_get_description(c);
    return amqp_error{n ? n : "", d ? d : ""};
}

} // namespace

std::ostream& operator<<(std::ostream& o, const amqp_error& e) {
    return o << e.name << " (" << e.description << ")";
}
std::ostream& operator<<(std::ostream& o, const std::optional<amqp_error>& e) {
    if (!e) return o << "no error";
    return o << *e;
}
std::ostream& operator<<(std::ostream& o, outcome_kind k) {
    switch (k) {
    case outcome_kind::none: return o << "none";
    case outcome_kind::accepted: return o << "accepted";
    case outcome_kind::rejected: return o << "rejected";
    case outcome_kind::released: return o << "released";
    case outcome_kind::modified: return o << "modified";
    case outcome_kind::settled_without_outcome: return o << "settled-without-outcome";
    }
    return o << "?";
}

struct test_client::link_state {
    bool is_sender = false;
    proton::sender sender;       // container thread only
    proton::receiver receiver;   // container thread only
    bool opened = false;
    bool closed = false;
    std::optional<amqp_error> error;
    std::string remote_address;
    uint64_t remote_max_message_size = 0;
    // sender
    std::deque<proton::message> pending;
    std::vector<proton::tracker> trackers; // container thread only
    std::vector<outcome> outcomes;         // one per sent message
    size_t queued = 0;
    // receiver
    std::vector<received_message> messages;
    std::vector<proton::delivery> deliveries; // container thread only
    std::vector<bool> settled;
    int drain_finished = 0;
    int drain_credit = -1;
};

// The container's handler: records everything under the client's mutex.
// Runs on the container thread.
class test_client::handler : public proton::messaging_handler {
  public:
    handler(test_client& owner, std::string address, proton::connection_options copts)
        : owner_(owner), address_(std::move(address)), copts_(std::move(copts)) {}

    // --- state, guarded by owner_.mu_ ---
    bool started = false;
    bool ended = false; // container.run() returned
    bool opened = false;
    bool closed = false;
    std::optional<amqp_error> error;
    std::vector<std::string> offered_caps;
    std::string remote_container;
    std::map<int, link_state> links;
    std::map<pn_link_t*, int> link_ids;
    std::map<pn_delivery_t*, std::pair<int, size_t>> trackers;
    int next_link = 1;
    proton::work_queue* wq = nullptr;

    proton::container container{*this};
    proton::connection conn; // container thread only

    void notify() { owner_.cv_.notify_all(); }

    link_state* find(const proton::link& l) {
        auto it = link_ids.find(pn_of(l));
        return it == link_ids.end() ? nullptr : &links[it->second];
    }

    // Sends queued messages while there is credit. Holds mu_.
    void pump(link_state& ls) {
        if (!ls.is_sender || ls.closed) return;
        while (!ls.pending.empty() && ls.sender.credit() > 0) {
            proton::tracker t = ls.sender.send(ls.pending.front());
            ls.pending.pop_front();
            const size_t index = ls.trackers.size();
            ls.trackers.push_back(t);
            ls.outcomes.push_back({});
            trackers[pn_of(t)] = {link_ids[pn_of(ls.sender)], index};
        }
    }

    void on_container_start(proton::container& c) override {
        std::lock_guard lock(owner_.mu_);
        conn = c.connect(address_, copts_);
        wq = &conn.work_queue();
        started = true;
        notify();
    }
    void on_container_stop(proton::container&) override {}

    void on_connection_open(proton::connection& c) override {
        std::lock_guard lock(owner_.mu_);
        opened = true;
        offered_caps.clear();
        for (const auto& s : c.offered_capabilities()) offered_caps.push_back(s);
        remote_container = c.container_id();
        notify();
    }
    void on_connection_error(proton::connection& c) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(c.error());
        notify();
    }
    void on_connection_close(proton::connection&) override {
        std::lock_guard lock(owner_.mu_);
        closed = true;
        notify();
    }
    void on_transport_error(proton::transport& t) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(t.error());
        closed = true;
        notify();
    }
    void on_transport_close(proton::transport&) override {
        std::lock_guard lock(owner_.mu_);
        closed = true;
        for (auto& [id, ls] : links) ls.closed = true;
        notify();
    }
    void on_session_error(proton::session& s) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(s.error());
        notify();
    }
    void on_error(const proton::error_condition& c) override {
        std::lock_guard lock(owner_.mu_);
        if (!error) error = to_error(c);
        notify();
    }

    void on_sender_open(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) {
            ls->opened = true;
            ls->remote_address = s.target().address();
            ls->remote_max_message_size = pn_link_remote_max_message_size(pn_of(s));
            pump(*ls);
        }
        notify();
    }
    void on_sendable(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) pump(*ls);
        notify();
    }
    void on_sender_error(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) ls->error = to_error(s.error());
        notify();
    }
    void on_sender_close(proton::sender& s) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(s)) {
            ls->closed = true;
            if (!ls->error) ls->error = to_error(s.error());
        }
        notify();
    }
    void on_sender_detach(proton::sender& s) override { on_sender_close(s); }

    void on_receiver_open(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) {
            ls->opened = true;
            ls->remote_address = r.source().address();
        }
        notify();
    }
    void on_receiver_error(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) ls->error = to_error(r.error());
        notify();
    }
    void on_receiver_close(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) {
            ls->closed = true;
            if (!ls->error) ls->error = to_error(r.error());
        }
        notify();
    }
    void on_receiver_detach(proton::receiver& r) override { on_receiver_close(r); }
    void on_receiver_drain_finish(proton::receiver& r) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(r)) {
            ++ls->drain_finished;
            ls->drain_credit = r.credit();
        }
        notify();
    }
    void on_message(proton::delivery& d, proton::message& m) override {
        std::lock_guard lock(owner_.mu_);
        if (link_state* ls = find(d.receiver())) {
            const bool presettled = pn_delivery_settled(pn_of(d));
            ls->messages.push_back({m, presettled});
            ls->deliveries.push_back(d);
            ls->settled.push_back(presettled);
        }
        notify();
    }

    outcome* outcome_of(const proton::tracker& t) {
        auto it = trackers.find(pn_of(t));
        if (it == trackers.end()) return nullptr;
        return &links[it->second.first].outcomes[it->second.second];
    }
    void on_tracker_accept(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) o->kind = outcome_kind::accepted;
        notify();
    }
    void on_tracker_reject(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) {
            o->kind = outcome_kind::rejected;
            o->condition = to_error(pn_disposition_condition(pn_delivery_remote(pn_of(t))));
        }
        notify();
    }
    void on_tracker_release(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t)) {
            pn_delivery_t* d = pn_of(t);
            if (pn_delivery_remote_state(d) == PN_MODIFIED) {
                o->kind = outcome_kind::modified;
                o->delivery_failed = pn_disposition_is_failed(pn_delivery_remote(d));
                o->undeliverable_here = pn_disposition_is_undeliverable(pn_delivery_remote(d));
            } else {
                o->kind = outcome_kind::released;
            }
        }
        notify();
    }
    void on_tracker_settle(proton::tracker& t) override {
        std::lock_guard lock(owner_.mu_);
        if (outcome* o = outcome_of(t))
            if (o->kind == outcome_kind::none) o->kind = outcome_kind::settled_without_outcome;
        notify();
    }

  private:
    test_client& owner_;
    std::string address_;
    proton::connection_options copts_;
};

// ---- test_client ----------------------------------------------------------

test_client::test_client(const std::string& address, client_options opts) : opts_(std::move(opts)) {
    proton::connection_options co;
    if (opts_.sasl == sasl_mode::none) co.sasl_enabled(false);
    else co.sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
    if (opts_.idle_timeout) co.idle_timeout(proton::duration(opts_.idle_timeout->count()));
    if (opts_.max_frame_size) co.max_frame_size(*opts_.max_frame_size);
    if (!opts_.container_id.empty()) co.container_id(opts_.container_id);
    handler_ = std::make_unique<handler>(*this, address, co);
    thread_ = std::thread([this] {
        try {
            handler_->container.run();
        } catch (const std::exception& e) {
            std::lock_guard lock(mu_);
            if (!handler_->error) handler_->error = amqp_error{"test-client:exception", e.what()};
        }
        std::lock_guard lock(mu_);
        handler_->ended = true;
        handler_->closed = true;
        cv_.notify_all();
    });
    wait_until([this] { return handler_->started || handler_->ended; });
}

test_client::~test_client() {
    close();
    wait_closed();
    bool ended = false;
    {
        std::lock_guard lock(mu_);
        ended = handler_->ended;
    }
    if (!ended) handler_->container.stop();
    thread_.join();
}

bool test_client::wait_until(const std::function<bool()>& pred) {
    return wait_until(pred, opts_.timeout);
}
bool test_client::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, std::chrono::steady_clock::now() + timeout, pred);
}

bool test_client::call(std::function<void()> f) {
    auto done = std::make_shared<bool>(false);
    proton::work_queue* wq = nullptr;
    {
        std::lock_guard lock(mu_);
        if (handler_->ended || handler_->wq == nullptr) return false;
        wq = handler_->wq;
    }
    const bool added = wq->add([this, f = std::move(f), done] {
        f();
        std::lock_guard lock(mu_);
        *done = true;
        cv_.notify_all();
    });
    if (!added) return false;
    return wait_until([this, done] { return *done || handler_->ended; }) && *done;
}

test_client::link_state& test_client::link(int id) { return handler_->links[id]; }

bool test_client::wait_open() {
    wait_until([this] { return handler_->opened || handler_->closed || handler_->error; });
    std::lock_guard lock(mu_);
    return handler_->opened && !handler_->error;
}
std::optional<amqp_error> test_client::wait_error() {
    wait_until([this] { return handler_->error.has_value() || handler_->closed; });
    std::lock_guard lock(mu_);
    return handler_->error;
}
bool test_client::wait_closed() { return wait_closed(opts_.timeout); }
bool test_client::wait_closed(std::chrono::milliseconds timeout) {
    return wait_until([this] { return handler_->closed; }, timeout);
}
std::optional<amqp_error> test_client::error() {
    std::lock_guard lock(mu_);
    return handler_->error;
}
bool test_client::is_closed() {
    std::lock_guard lock(mu_);
    return handler_->closed;
}
std::vector<std::string> test_client::offered_capabilities() {
    std::lock_guard lock(mu_);
    return handler_->offered_caps;
}
std::string test_client::remote_container_id() {
    std::lock_guard lock(mu_);
    return handler_->remote_container;
}

void test_client::close() {
    call([this] {
        if (handler_->conn && !handler_->conn.closed()) handler_->conn.close();
    });
}

test_sender test_client::open_sender(const std::string& address, proton::sender_options opts) {
    int id = 0;
    {
        std::lock_guard lock(mu_);
        id = handler_->next_link++;
        link(id).is_sender = true;
    }
    call([this, address, opts, id] {
        proton::sender s = handler_->conn.open_sender(address, opts);
        std::lock_guard lock(mu_);
        link(id).sender = s;
        handler_->link_ids[pn_of(s)] = id;
    });
    return test_sender(this, id);
}

test_sender test_client::open_anonymous_sender(proton::sender_options opts) {
    proton::target_options t;
    t.anonymous(true);
    opts.target(t);
    return open_sender("", opts);
}

test_receiver test_client::open_receiver(const std::string& address, proton::receiver_options opts) {
    int id = 0;
    {
        std::lock_guard lock(mu_);
        id = handler_->next_link++;
    }
    call([this, address, opts, id] {
        proton::receiver r = handler_->conn.open_receiver(address, opts);
        std::lock_guard lock(mu_);
        link(id).receiver = r;
        handler_->link_ids[pn_of(r)] = id;
    });
    return test_receiver(this, id);
}

// ---- test_sender ----------------------------------------------------------

bool test_sender::wait_open() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.opened || l.closed || l.error;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.opened && !l.closed && !l.error;
}
std::optional<amqp_error> test_sender::wait_error() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.closed || l.error.has_value();
    });
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).error;
}
bool test_sender::wait_closed() {
    return c_->wait_until([&] { return c_->link(id_).closed; });
}
int test_sender::credit() {
    auto credit = std::make_shared<int>(-1);
    c_->call([c = c_, id = id_, credit] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (l.sender) *credit = l.sender.credit();
    });
    std::lock_guard lock(c_->mu_);
    return *credit;
}
bool test_sender::wait_credit_at_least(int n) {
    // Credit changes arrive as on_sendable, which notifies: check it then.
    auto deadline = std::chrono::steady_clock::now() + c_->timeout();
    while (std::chrono::steady_clock::now() < deadline) {
        if (credit() >= n) return true;
        std::unique_lock lock(c_->mu_);
        c_->cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                        std::chrono::milliseconds(50)));
    }
    return credit() >= n;
}
std::string test_sender::remote_target_address() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_address;
}
uint64_t test_sender::remote_max_message_size() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_max_message_size;
}
size_t test_sender::send(const proton::message& m) {
    size_t index = 0;
    {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        index = l.queued++;
        l.pending.push_back(m);
    }
    c_->call([c = c_, id = id_] {
        std::lock_guard lock(c->mu_);
        c->handler_->pump(c->link(id));
    });
    return index;
}
size_t test_sender::sent_count() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).outcomes.size();
}
outcome test_sender::wait_outcome(size_t index) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return (l.outcomes.size() > index && l.outcomes[index].kind != outcome_kind::none) ||
               l.closed;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.outcomes.size() > index ? l.outcomes[index] : outcome{};
}
std::vector<outcome> test_sender::wait_outcomes(size_t count) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        if (l.closed) return true;
        if (l.outcomes.size() < count) return false;
        for (size_t i = 0; i < count; ++i)
            if (l.outcomes[i].kind == outcome_kind::none) return false;
        return true;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    std::vector<outcome> out(l.outcomes.begin(),
                             l.outcomes.begin() + static_cast<long>(std::min(count, l.outcomes.size())));
    return out;
}
void test_sender::close() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.sender && !l.closed) l.sender.close();
    });
}

// ---- test_receiver --------------------------------------------------------

bool test_receiver::wait_open() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.opened || l.closed || l.error;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.opened && !l.closed && !l.error;
}
std::optional<amqp_error> test_receiver::wait_error() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.closed || l.error.has_value();
    });
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).error;
}
bool test_receiver::wait_closed() {
    return c_->wait_until([&] { return c_->link(id_).closed; });
}
std::string test_receiver::remote_source_address() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_address;
}
int test_receiver::credit() {
    auto credit = std::make_shared<int>(-1);
    c_->call([c = c_, id = id_, credit] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (l.receiver) *credit = l.receiver.credit();
    });
    std::lock_guard lock(c_->mu_);
    return *credit;
}
void test_receiver::add_credit(int n) {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.receiver && !l.closed) l.receiver.add_credit(static_cast<uint32_t>(n));
    });
}
void test_receiver::drain() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (!l.receiver || l.closed) return;
        try {
            l.receiver.drain();
        } catch (const std::exception& e) {
            l.error = amqp_error{"test-client:drain", e.what()};
        }
    });
}
std::optional<int> test_receiver::wait_drain_finished() {
    // Consumes one drain-finish event (one that came before this call counts).
    const bool ok = c_->wait_until([&] { return c_->link(id_).drain_finished > 0; });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    if (!ok) return std::nullopt;
    --l.drain_finished;
    return l.drain_credit;
}
std::vector<received_message> test_receiver::wait_messages(size_t count) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.messages.size() >= count || l.closed;
    });
    return messages();
}
std::vector<received_message> test_receiver::messages() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).messages;
}
size_t test_receiver::message_count() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).messages.size();
}
void test_receiver::settle(size_t index, settle_as how) {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (index >= l.deliveries.size() || l.settled[index]) return;
        pn_delivery_t* d = pn_of(l.deliveries[index]);
        switch (how) {
        case settle_as::accept: pn_delivery_update(d, PN_ACCEPTED); break;
        case settle_as::reject: pn_delivery_update(d, PN_REJECTED); break;
        case settle_as::release: pn_delivery_update(d, PN_RELEASED); break;
        case settle_as::modified_failed:
            pn_disposition_set_failed(pn_delivery_local(d), true);
            pn_delivery_update(d, PN_MODIFIED);
            break;
        case settle_as::modified_undeliverable:
            pn_disposition_set_undeliverable(pn_delivery_local(d), true);
            pn_delivery_update(d, PN_MODIFIED);
            break;
        }
        pn_delivery_settle(d);
        l.settled[index] = true;
    });
}
void test_receiver::settle_all(settle_as how) {
    size_t n = message_count();
    for (size_t i = 0; i < n; ++i) settle(i, how);
}
void test_receiver::close() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.receiver && !l.closed) l.receiver.close();
    });
}

// ---- helpers ---------------------------------------------------------------

proton::message text_message(const std::string& body, const std::string& to) {
    proton::message m(body);
    if (!to.empty()) m.to(to);
    return m;
}

proton::receiver_options receiver_credit(int window) {
    proton::receiver_options o;
    o.credit_window(window).auto_accept(false);
    return o;
}

} // namespace wharf::server::test
