#include "tools/wharf-bench/connection_client.hpp"

#include <proton/connection_options.hpp>

#include <exception>
#include <string>

namespace wharf::bench {

// ---- connection_client ----

connection_client::connection_client(run_control& run, int index) : guarded_handler(run), index_(index) {}

void connection_client::connect(proton::container& c) {
    const auto& o = run_.options();
    wharf::client::client_options co;
    co.connection.container_id(o.container_id_prefix + "-" + std::to_string(index_));
    if (!o.user.empty())
        co.connection.sasl_enabled(true).sasl_allowed_mechs("PLAIN").sasl_allow_insecure_mechs(true)
            .user(o.user).password(o.password);
    client_ = std::make_unique<wharf::client::cluster_client>(c, co);
    connected_.store(true);          // seq_cst, with closing_ in request_close():
    if (closing_.load()) return;     // one of the two sees the other
    // Receivers first, so they are attached before the first message.
    for (auto& r : receivers_) r->open(*client_);
    for (auto& s : senders_) s->open(*client_);
}

bool connection_client::request_close() {
    closing_.store(true);
    if (!connected_.load()) return false;
    return client_->close() > 0;
}

void connection_client::poke_senders() {
    for (auto& s : senders_) s->poke();
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
    if (o.listening()) {
        std::vector<receiver_client*> receivers;
        for (auto& conn : connections_)
            for (auto& r : conn->receivers()) receivers.push_back(r.get());
        listener_ = std::make_unique<listen_server>(run, std::move(receivers));
    }
}

void bench_clients::on_container_start(proton::container& c) {
    // No exception may leave a Proton callback: a malformed --url throws here.
    try {
        if (listener_) {
            listener_->listen(c);
            return;
        }
        for (auto& conn : connections_) conn->connect(c);
    } catch (const std::exception& e) {
        const auto& o = run_.options();
        run_.fail(listener_ ? "listen on " + o.listen + ": " + e.what()
                            : "connect to " + o.url + ": " + e.what());
    }
}

std::uint64_t bench_clients::first_attach_ns() const {
    std::uint64_t first = 0;
    for (auto& conn : connections_)
        for (auto& r : conn->receivers())
            if (const auto at = r->attached_ns(); at != 0 && (first == 0 || at < first)) first = at;
    return first;
}

int bench_clients::request_close_all() {
    if (listener_) listener_->set_closing();
    int closing = 0;
    for (auto& conn : connections_) closing += conn->request_close() ? 1 : 0;
    return closing;
}

void bench_clients::poke_all_senders() {
    for (auto& conn : connections_) conn->poke_senders();
}

} // namespace wharf::bench
