#include "broker/server/server.hpp"

#include "broker/engine/message_body.hpp"
#include "broker/server/peer_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/condition.h>
#include <proton/netaddr.h>
#include <proton/sasl.h>
#include <proton/transport.h>
#include <spdlog/spdlog.h>

#include <netdb.h>
#include <sys/socket.h>

#include <sched.h>

#include <algorithm>
#include <thread>

namespace wharf::server {

namespace {
constexpr pn_millis_t tick_ms = 1000;
constexpr pn_millis_t shutdown_grace_ms = 3000;
// How many times one event batch may run a connection's end_batch() (and
// take the events it raised) before the rest waits for the next batch.
constexpr int end_batch_rounds = 2;
// The longest a worker polls (pn_proactor_get) between two pn_proactor_wait
// calls, however often its polls find work: see next_batch.
constexpr auto max_poll_stretch = std::chrono::milliseconds(2);

std::string bound_address(pn_listener_t* l) {
    const pn_netaddr_t* na = pn_listener_addr(l);
    if (na == nullptr) return "?";
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getnameinfo(pn_netaddr_sockaddr(na), static_cast<socklen_t>(pn_netaddr_socklen(na)), host,
                    sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    std::string h(host);
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    return h + ":" + port;
}
} // namespace

server::server(const config::node_config& cfg, engine::queue_engine& engine,
               std::function<void(const std::string&)> on_listening)
    : cfg_(cfg), engine_(engine), on_listening_(std::move(on_listening)),
      proactor_(pn_proactor()), threads_(cfg.threads == 0 ? 1 : cfg.threads),
      relays_([this](const std::string& node, const std::string& host, uint16_t port) {
          return connect_peer(node, host, port);
      }),
      producer_budget_(cfg.producer_credit_budget), ticks_(proactor_),
      engine_ticked_(std::chrono::steady_clock::now()) {
    settings_.relays = &relays_;
    settings_.producers = &producer_budget_;
    settings_.node_id = cfg.node_id;
    // "Unlimited" (0) and anything larger mean the largest body a message can
    // have; that is what links advertise and enforce.
    settings_.max_message_size = cfg.max_message_size == 0 || cfg.max_message_size > engine::message_ref::max_size
                                     ? engine::message_ref::max_size
                                     : cfg.max_message_size;
    settings_.credit_window = cfg.credit_window;
    settings_.connection_credit = cfg.connection_credit_budget;
    settings_.ticks = &ticks_;
}

server::~server() {
    connections_.clear();
    pn_proactor_free(proactor_);
}

int server::run() {
    for (const auto& lcfg : cfg_.listeners) {
        auto lc = std::make_unique<listener_ctx>();
        lc->cfg = lcfg;
        lc->listener = pn_listener();
        pn_listener_set_context(lc->listener, lc.get());
        const std::string addr = lcfg.host + ":" + std::to_string(lcfg.port);
        std::lock_guard lock(table_mu_); // stop() may run already (a signal during start)
        if (stopping_.load()) {
            pn_listener_free(lc->listener);
            break;
        }
        pn_proactor_listen(proactor_, lc->listener, addr.c_str(), 128);
        listeners_.push_back(std::move(lc));
    }
    pn_proactor_set_timeout(proactor_, tick_ms);
    std::vector<std::thread> workers;
    for (unsigned i = 1; i < threads_; ++i) workers.emplace_back([this] { worker(); });
    worker();
    for (auto& t : workers) t.join();
    return failed_.load() ? 1 : 0;
}

void server::stop() {
    if (stopping_.exchange(true)) return;
    spdlog::info("{}: shutting down", cfg_.node_id);
    {
        std::lock_guard lock(table_mu_);
        for (auto& l : listeners_)
            if (!l->closed) pn_listener_close(l->listener);
        for (auto& [pn, conn] : connections_) conn->request_shutdown();
    }
    // Clients get shutdown_grace_ms to answer our close; then we cut them off.
    pn_proactor_set_timeout(proactor_, shutdown_grace_ms);
    finish_all_stopped();
}

// The next event batch: polled for while the window lasts (busy_poll.hpp),
// then waited for. `last_events`: how many events the last batch had.
//
// pn_proactor_get never reads Proton's ready list, and Proton signals that
// list's event fd only for its first entry since the poller last read it:
// a second connection wake, a connection Proton reschedules itself, or the
// work its timers schedule would wait while the worker keeps polling. Only
// pn_proactor_wait reads the list, and only when nothing taken by an
// earlier poll is still runnable. So the worker stops polling as soon as a
// connection was woken (connection_wakes()) since the list was surely read,
// then takes what is runnable with pn_proactor_get and, once that is
// nothing, pn_proactor_wait, which now reads the list (at once when it
// holds something). And it polls for at most max_poll_stretch since the
// list was last read; then it waits without polling.
pn_event_batch_t* server::next_batch(poll_state& ps, int last_events) {
    using clock = std::chrono::steady_clock;
    const auto window = ps.window.window(last_events);
    const auto idle_since = clock::now();
    const auto until = std::min(idle_since + window, ps.list_read + max_poll_stretch);
    if (window > clock::duration::zero() && idle_since < until) {
        do {
            if (connection_wakes().load(std::memory_order_acquire) != ps.wakes_at_read) break;
            if (pn_event_batch_t* batch = pn_proactor_get(proactor_)) return batch;
            sched_yield(); // a process on this core with work to do goes first
        } while (clock::now() < until);
        if (pn_event_batch_t* batch = pn_proactor_get(proactor_)) return batch; // runnable first
        ps.wakes_at_read = connection_wakes().load(std::memory_order_acquire);
        pn_event_batch_t* batch = pn_proactor_wait(proactor_); // nothing runnable: reads the list
        ps.list_read = clock::now();
        ps.window.idled(ps.list_read - idle_since); // the poll and the sleep: how long the event took
        return batch;
    }
    pn_event_batch_t* batch = pn_proactor_wait(proactor_);
    const auto now = clock::now();
    if (window > clock::duration::zero()) ps.list_read = now; // the stretch's end (see above)
    ps.window.idled(now - idle_since);
    return batch;
}

void server::worker() {
    int last_events = 0;
    poll_state ps{poll_window{std::chrono::microseconds(cfg_.busy_poll_in_effect())}};
    while (!done_.load()) {
        pn_event_batch_t* batch = next_batch(ps, last_events);
        last_events = 0;
        connection_base* conn = nullptr;
        bool finished = false;
        pn_event_t* e = pn_event_batch_next(batch);
        for (int round = 1;; ++round) {
            for (; e != nullptr; e = pn_event_batch_next(batch), ++last_events)
                if (!handle(e, conn)) finished = true;
            if (conn == nullptr) break;
            conn->end_batch();
            if (conn->finished() || round == end_batch_rounds) break;
            // What end_batch did (deliveries, dispositions, flow) raised
            // events and output. Taking them in this same batch lets Proton
            // write the output when the batch runs dry; left to
            // pn_proactor_done, it would schedule the connection again
            // through the proactor's wake-up fd first: two system calls and
            // a round through its scheduler on every message's path.
            e = pn_event_batch_next(batch);
            if (e == nullptr) break;
        }
        if (conn != nullptr && conn->finished()) finish(conn);
        pn_proactor_done(proactor_, batch);
        if (finished) done_.store(true);
    }
    // Wake the next worker, which wakes the one after it as it leaves.
    // Proton's interrupts do not add up: interrupting once per worker here
    // woke only one of those asleep, and a node with three or more workers
    // never stopped.
    pn_proactor_interrupt(proactor_);
}

// Returns false when the proactor has nothing left to do (stopped).
bool server::handle(pn_event_t* e, connection_base*& conn) {
    switch (pn_event_type(e)) {
    case PN_LISTENER_OPEN: {
        pn_listener_t* l = pn_event_listener(e);
        const std::string addr = bound_address(l);
        spdlog::info("{} listening on {}", cfg_.node_id, addr);
        // The ready lines only once every listener is open: a supervisor
        // reading the first must not take a node that is about to fail on
        // its second listener for a started one.
        std::vector<std::string> ready;
        {
            std::lock_guard lock(table_mu_);
            opened_addrs_.push_back(addr);
            if (opened_addrs_.size() == listeners_.size()) ready = opened_addrs_;
        }
        if (on_listening_)
            for (const auto& a : ready) on_listening_(a);
        return true;
    }
    case PN_LISTENER_ACCEPT:
        accept(*static_cast<listener_ctx*>(pn_listener_get_context(pn_event_listener(e))));
        return true;
    case PN_LISTENER_CLOSE: {
        pn_listener_t* l = pn_event_listener(e);
        auto* lc = static_cast<listener_ctx*>(pn_listener_get_context(l));
        {
            std::lock_guard lock(table_mu_);
            lc->closed = true;
        }
        pn_condition_t* c = pn_listener_condition(l);
        if (pn_condition_is_set(c) && !stopping_.load()) {
            spdlog::error("{}: cannot listen on {}:{}: {}", cfg_.node_id, lc->cfg.host,
                          lc->cfg.port, pn_condition_get_description(c));
            if (spdlog::get_level() == spdlog::level::off) // still said, as every startup error is
                std::fprintf(stderr, "wharfd: cannot listen on %s:%u: %s\n", lc->cfg.host.c_str(),
                             static_cast<unsigned>(lc->cfg.port), pn_condition_get_description(c));
            failed_.store(1);
            stop();
        }
        finish_all_stopped();
        return true;
    }
    case PN_PROACTOR_TIMEOUT:
        if (stopping_.load()) {
            pn_condition_t* cond = pn_condition();
            set_condition(cond, errc::connection_forced,
                          "the node " + cfg_.node_id + " is shutting down");
            pn_proactor_disconnect(proactor_, cond);
            pn_condition_free(cond);
        } else {
            // The engine ticks once a second; connections at every tick,
            // which comes every few milliseconds while one asks for it.
            const auto now = std::chrono::steady_clock::now();
            auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - engine_ticked_).count();
            if (since >= tick_ms) {
                engine_.post(engine::cmd_tick{});
                engine_ticked_ = now;
                since = 0;
            }
            {
                std::lock_guard lock(table_mu_);
                for (auto& [pc, conn] : connections_) conn->on_tick();
            }
            if (ticks_.take()) {
                pn_proactor_set_timeout(proactor_, tick_requests::fast_ms);
            } else {
                pn_proactor_set_timeout(proactor_, static_cast<pn_millis_t>(tick_ms - since));
                // A connection that asked in between set the sooner timeout
                // first, and the line above replaced it.
                if (ticks_.wanted()) pn_proactor_set_timeout(proactor_, tick_requests::fast_ms);
            }
        }
        return true;
    case PN_PROACTOR_INACTIVE:
        return !stopping_.load();
    case PN_PROACTOR_INTERRUPT:
        return true;
    default:
        break;
    }
    if (pn_connection_t* pc = pn_event_connection(e)) {
        auto* c = connection_base::of(pc);
        if (c != nullptr) {
            conn = c;
            c->on_event(e);
        }
    }
    return true;
}

void server::accept(listener_ctx& lc) {
    pn_connection_t* pc = pn_connection();
    pn_transport_t* t = pn_transport();
    pn_transport_set_server(t);
    pn_transport_require_auth(t, false);
    pn_sasl_t* sasl = pn_sasl(t);
    pn_sasl_allowed_mechs(sasl, "ANONYMOUS");
    pn_transport_set_max_frame(t, lc.cfg.max_frame_size);
    pn_transport_set_idle_timeout(t, static_cast<pn_millis_t>(lc.cfg.idle_timeout.count()));

    auto conn = std::make_unique<amqp_connection>(pc, settings_, engine_, link_ids_);
    // The AMQP open must come within the idle-timeout (a minute when there
    // is none): until then Proton keeps no time-out of its own.
    const auto idle = lc.cfg.idle_timeout;
    conn->open_within(idle.count() > 0 ? idle : std::chrono::milliseconds(60000));
    const size_t n = connection_count_.fetch_add(1) + 1;
    if (stopping_.load()) {
        conn->refuse(errc::connection_forced, "the node " + cfg_.node_id + " is shutting down");
    } else if (cfg_.max_connections != 0 && n > cfg_.max_connections) {
        conn->refuse(errc::resource_limit_exceeded,
                     "the node " + cfg_.node_id + " allows at most " +
                         std::to_string(cfg_.max_connections) + " connections (max-connections)");
    }
    {
        std::lock_guard lock(table_mu_);
        connections_.emplace(pc, std::move(conn));
    }
    pn_listener_accept2(lc.listener, pc, t);
}

std::shared_ptr<relay::mailbox> server::connect_peer(const std::string& node, const std::string& host,
                                                     uint16_t port) {
    if (stopping_.load()) return nullptr;
    pn_connection_t* pc = pn_connection();
    auto peer = std::make_unique<peer_connection>(pc, cfg_.node_id, node, relays_);
    auto inbox = peer->inbox();
    {
        std::lock_guard lock(table_mu_);
        connections_.emplace(pc, std::move(peer));
    }
    const std::string addr = host + ":" + std::to_string(port);
    spdlog::info("{}: relay: connecting to node {} at {}", cfg_.node_id, node, addr);
    // The node's idle-timeout, as its listeners apply it to clients: an owner
    // that falls silent (frozen, or cut off without a reset) ends the
    // connection with amqp:resource-limit-exceeded, and its relayed links are
    // detached as when it drops (peer_connection, PN_TRANSPORT_CLOSED).
    pn_transport_t* t = pn_transport();
    pn_transport_set_idle_timeout(t, static_cast<pn_millis_t>(cfg_.idle_timeout.count()));
    pn_proactor_connect2(proactor_, pc, t, addr.c_str());
    return inbox;
}

std::vector<connection_info> server::connection_infos() {
    std::vector<connection_info> out;
    std::lock_guard lock(table_mu_);
    for (auto& [pn, c] : connections_)
        if (auto* a = dynamic_cast<amqp_connection*>(c.get())) out.push_back(a->info());
    return out;
}

bool server::close_connection(uint64_t id, const std::string& why) {
    std::lock_guard lock(table_mu_); // the connection is not freed meanwhile
    for (auto& [pn, c] : connections_) {
        auto* a = dynamic_cast<amqp_connection*>(c.get());
        if (a == nullptr || a->serial() != id) continue;
        a->request_close(why);
        return true;
    }
    return false;
}

void server::finish(connection_base* conn) {
    std::unique_ptr<connection_base> gone;
    {
        std::lock_guard lock(table_mu_);
        auto it = connections_.find(conn->pn());
        if (it != connections_.end()) {
            gone = std::move(it->second);
            connections_.erase(it);
        }
    }
    if (dynamic_cast<amqp_connection*>(conn) != nullptr) connection_count_.fetch_sub(1); // peers are not counted
    finish_all_stopped();
}

// Once stopping and nothing is left open, let the proactor go inactive now
// rather than at the end of the grace period.
void server::finish_all_stopped() {
    if (!stopping_.load()) return;
    std::lock_guard lock(table_mu_);
    if (!connections_.empty()) return;
    for (auto& l : listeners_)
        if (!l->closed) return;
    pn_proactor_cancel_timeout(proactor_);
}

} // namespace wharf::server
