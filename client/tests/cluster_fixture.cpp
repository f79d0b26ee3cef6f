#include "client/tests/cluster_fixture.hpp"

#include "client/redirect_target.hpp"

#include <gtest/gtest.h>

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/source.hpp>
#include <proton/target.hpp>
#include <proton/transport.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace wharf::client::test {

using server::test::wharfd_options;
using server::test::wharfd_process;


// ---- two_node_cluster ---------------------------------------------------------------

two_node_cluster::two_node_cluster(cluster_options o) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/wharf-client-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
        ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
        return;
    }
    dir_ = tmpl;
    std::string config = "plugins = [\"wlm\"]\nmetadata = \"" + metadata() + "\"\n\n[plugin.wlm]\n";
    if (!o.rules.empty()) {
        config += "rules = [";
        for (size_t i = 0; i < o.rules.size(); ++i) config += (i ? ", \"" : "\"") + o.rules[i] + "\"";
        config += "]\n";
    }
    config += "lease-ttl = 1\npoll-interval = 0.05\nmode = \"" + o.mode + "\"\n";

    // n2 first: n1 then finds it a member when it starts.
    for (int node : {2, 1}) {
        // A free port may be taken by another test's process before ours
        // binds it: then the start fails and another port is tried.
        for (int attempt = 0; attempt < 5; ++attempt) {
            const uint16_t port = free_port();
            ports_[node - 1] = port;
            const std::string here = "127.0.0.1:" + std::to_string(port);
            wharfd_options w;
            w.node_id = "n" + std::to_string(node);
            w.config_toml = config;
            if (node == 2 && o.n2_unreachable) w.args = {"--advertise", here}; // nothing listens there
            else w.args = {"--listen", here, "--advertise", here};
            if (nodes_[node - 1]) nodes_[node - 1]->expect_any_exit(); // the failed attempt
            nodes_[node - 1] = std::make_unique<wharfd_process>(w);
            if (nodes_[node - 1]->listening()) break;
        }
        if (!nodes_[node - 1]->listening()) {
            ADD_FAILURE() << "n" << node << " did not start: " << nodes_[node - 1]->stderr_text();
            return;
        }
    }
}

two_node_cluster::~two_node_cluster() {
    nodes_[0].reset();
    nodes_[1].reset();
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
}

bool two_node_cluster::ok() const {
    return nodes_[0] && nodes_[1] && nodes_[0]->listening() && nodes_[1]->listening();
}

std::string two_node_cluster::url(int node) const { return "127.0.0.1:" + std::to_string(port(node)); }

uint16_t two_node_cluster::port(int node) const { return ports_[node - 1]; }

wharfd_process& two_node_cluster::process(int node) { return *nodes_[node - 1]; }

// ---- raw_attach -----------------------------------------------------------------------

namespace {

// Plain Proton C++: connect, attach one link, record how it ends. Runs on
// its own container thread; `result` and `finished` under mu.
class raw_probe : public proton::messaging_handler {
  public:
    raw_probe(std::string url, std::string address, bool sender)
        : url_(std::move(url)), address_(std::move(address)), sender_(sender) {}

    std::mutex mu;
    std::condition_variable cv;
    proton::error_condition result;
    bool finished = false;

  private:
    void on_container_start(proton::container& c) override {
        c.connect(url_, proton::connection_options().sasl_enabled(false));
    }
    void on_connection_open(proton::connection& c) override {
        if (sender_) c.open_sender(address_);
        else c.open_receiver(address_);
    }
    // An attach answered with a real terminus is a link that stays open.
    void on_sender_open(proton::sender& s) override {
        if (!s.target().address().empty()) s.connection().close();
    }
    void on_receiver_open(proton::receiver& r) override {
        if (!r.source().address().empty()) r.connection().close();
    }
    void on_sender_error(proton::sender& s) override { record(s.error()); }
    void on_receiver_error(proton::receiver& r) override { record(r.error()); }
    void on_sender_close(proton::sender& s) override { s.connection().close(); }
    void on_receiver_close(proton::receiver& r) override { r.connection().close(); }
    void on_transport_error(proton::transport& t) override { record(t.error()); }
    void on_transport_close(proton::transport&) override {
        std::lock_guard lock(mu);
        finished = true;
        cv.notify_all();
    }
    void on_error(const proton::error_condition& e) override { record(e); }
    void record(const proton::error_condition& e) {
        std::lock_guard lock(mu);
        if (result.empty()) result = owned_condition(e);
    }

    std::string url_, address_;
    bool sender_;
};

} // namespace

proton::error_condition raw_attach(const std::string& url, const std::string& address, bool sender) {
    raw_probe probe(url, address, sender);
    proton::container c(probe);
    std::thread runner([&c] { c.run(); });
    bool done = false;
    {
        std::unique_lock lock(probe.mu);
        done = probe.cv.wait_for(lock, std::chrono::seconds(15), [&] { return probe.finished; });
    }
    if (!done) c.stop();
    runner.join();
    std::lock_guard lock(probe.mu);
    if (!done) return proton::error_condition("test:timeout", "no answer from " + url);
    return probe.result;
}

} // namespace wharf::client::test
