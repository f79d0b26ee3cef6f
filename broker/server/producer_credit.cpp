// amqp_connection: producer credit. A producer's window is refilled at
// half; pooled producers (see credit_pool.hpp) take it from the
// connection's budget (its share of the node's, with many connections) in
// turns, and the server's fast tick forgives credit that links hold but do
// not use.

#include "broker/server/amqp_connection.hpp"
#include "broker/server/busy_poll.hpp"

namespace wharf::server {

void amqp_connection::top_up_credit(link_ctx& lc) {
    if (lc.relayed) return relay_credit(lc); // its turn in the pool's line came
    if (lc.closed || !lc.attached || lc.link == nullptr) return;
    if (lc.batch != 0) return top_up_batch_credit(lc); // a relay's batches (batch_links.cpp)
    const int64_t credit = pn_link_credit(lc.link);
    // What it used goes back to the connection's pool (blocked or not).
    if (lc.pool.joined) {
        size_pool();
        pool_.holds(lc.pool, credit);
    }
    if (lc.blocked) return;
    int64_t window = producer_window();
    if (lc.pool.joined) window = pool_.window(window); // at most its even part
    // An anonymous producer with a window of messages waiting here (for the
    // cluster to place their address, or for another node's credit: its
    // queue is full under the block policy, or it is slow) waits as a
    // whole, as it would for a full queue here: no more credit until they
    // move on (the placement's answer and the owner's flow call this again).
    if (lc.anonymous && anon_waiting(lc) >= static_cast<uint64_t>(std::max<int64_t>(window, 1))) return;
    int64_t add = refill(credit, window, window / 2); // refilled at half the window
    if (lc.pool.joined) add = pool_.grant(lc.pool, lc.id, add, pool_turn_ == lc.id);
    if (add > 0) pn_link_flow(lc.link, static_cast<int>(add));
}

void amqp_connection::serve_credit_line() {
    size_pool();
    if (tick_due_.exchange(false, std::memory_order_relaxed)) pool_.tick(pool_.window(producer_window()));
    for (engine::link_id id = pool_.next(); id != 0; id = pool_.next()) {
        link_ctx* lc = find(id);
        if (lc == nullptr) continue;
        credit_pool::served(lc->pool);
        pool_turn_ = id;
        top_up_credit(*lc);
        pool_turn_ = 0;
    }
    // Still waiting: the pool is held, perhaps by links that stopped
    // sending; ask the server for ticks every few milliseconds until not.
    const bool waiting = pool_.waiting() != 0;
    pool_line_.store(waiting, std::memory_order_relaxed);
    if (waiting && settings_.ticks != nullptr) settings_.ticks->want();
}

void amqp_connection::on_tick() {
    check_open_deadline();
    if (!pool_line_.load(std::memory_order_relaxed)) return;
    tick_due_.store(true, std::memory_order_relaxed);
    wake_connection(conn_); // safe: the server holds its table lock (see request_shutdown)
}

} // namespace wharf::server
