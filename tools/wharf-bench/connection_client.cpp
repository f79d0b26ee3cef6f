#include "tools/wharf-bench/connection_client.hpp"

#include <proton/connection_options.hpp>
#include <proton/transport.hpp>

#include <exception>
#include <string>

namespace wharf::bench {

// ---- connection_client ----

connection_client::connection_client(run_control& run, int index) : guarded_handler(run), index_(index) {}

void connection_client::connect(proton::container& c) {
    const auto& o = run_.options();
    connection_ = c.connect(o.url, proton::connection_options()
                                       .handler(*this)
                                       .container_id(o.container_id_prefix + "-" + std::to_string(index_)));
}

bool connection_client::post(proton::work f) {
    std::lock_guard lock(wq_mutex_);
    return work_queue_ != nullptr && work_queue_->add(std::move(f));
}

bool connection_client::request_close() {
    closing_.store(true, std::memory_order_relaxed);
    return post([this] { close_now(); });
}

void connection_client::poke_senders() {
    post([this] {
        for (auto& s : senders_) s->poke();
    });
}

void connection_client::close_now() {
    if (!connection_ || !connection_.active()) return;
    for (auto& r : receivers_) r->close();
    for (auto& s : senders_) s->close();
    connection_.close();
}

void connection_client::on_connection_open(proton::connection& c) {
    connection_ = c;
    {
        std::lock_guard lock(wq_mutex_);
        work_queue_ = &c.work_queue();
    }
    if (closing()) {
        close_now();
        return;
    }
    // Receivers first, so they are attached before the first message.
    for (auto& r : receivers_) r->open(c);
    for (auto& s : senders_) s->open(c);
}

void connection_client::on_connection_close(proton::connection& c) {
    if (!closing() && !run_.failed()) {
        if (c.error()) report("connection", c.error());
        else run_.fail("connection " + std::to_string(index_) + " closed by the peer");
    }
}

void connection_client::on_transport_close(proton::transport&) {
    {
        std::lock_guard lock(wq_mutex_);
        work_queue_ = nullptr;
    }
    transport_closed_.store(true, std::memory_order_release);
    if (!closing() && !run_.failed())
        run_.fail("connection " + std::to_string(index_) + " to " + run_.options().url + " ended unexpectedly");
}

// ---- bench_clients ----

bench_clients::bench_clients(run_control& run) : guarded_handler(run) {
    const auto& o = run.options();
    const bool send = o.mode != bench_mode::receive;
    const bool receive = o.mode != bench_mode::send;
    senders_by_link_.assign(static_cast<std::size_t>(o.total_links()), nullptr);
    for (int c = 0; c < o.connections; ++c) {
        auto conn = std::make_unique<connection_client>(run, c);
        for (int l = 0; l < o.links; ++l) {
            const int link = c * o.links + l;
            if (send) {
                const std::uint64_t quota = o.count ? o.share_of(*o.count, link) : UINT64_MAX;
                conn->senders().push_back(std::make_unique<sender_client>(run, *conn, link, quota));
                senders_by_link_[static_cast<std::size_t>(link)] = conn->senders().back().get();
            }
            if (receive)
                conn->receivers().push_back(std::make_unique<receiver_client>(run, *conn, link, senders_by_link_));
        }
        connections_.push_back(std::move(conn));
    }
}

void bench_clients::on_container_start(proton::container& c) {
    // No exception may leave a Proton callback: a malformed --url throws here.
    try {
        for (auto& conn : connections_) conn->connect(c);
    } catch (const std::exception& e) {
        run_.fail(std::string("connect to ") + run_.options().url + ": " + e.what());
    }
}

int bench_clients::request_close_all() {
    int closing = 0;
    for (auto& conn : connections_) closing += conn->request_close() ? 1 : 0;
    return closing;
}

void bench_clients::poke_all_senders() {
    for (auto& conn : connections_) conn->poke_senders();
}

} // namespace wharf::bench
