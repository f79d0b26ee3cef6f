// wharfd: one Wharf broker node.

#include "broker/config/node_config.hpp"
#include "broker/engine/queue_engine.hpp"
#include "broker/management/broker_entities.hpp"
#include "broker/management/management_service.hpp"
#include "broker/plugin_host.hpp"
#include "broker/server/server.hpp"
#include "broker/server/server_entities.hpp"
#include "broker/store/journal_store.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <string>
#include <thread>

#ifdef WHARF_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace {

// Which malloc serves the process, for the startup line: "jemalloc 5.3.0"
// when linked with it (the default build), else "system": the C library's,
// or the sanitizers' allocator in a sanitizer build.
std::string allocator_name() {
#ifdef WHARF_JEMALLOC
    const char* version = nullptr;
    size_t len = sizeof(version);
    if (mallctl("version", static_cast<void*>(&version), &len, nullptr, 0) == 0 && version != nullptr) {
        std::string v(version);
        return "jemalloc " + v.substr(0, v.find('-'));
    }
    return "jemalloc";
#else
    return "system";
#endif
}

// Blocks SIGTERM/SIGINT in every thread, and turns them into server::stop()
// on a thread of their own (nothing Proton offers is async-signal-safe
// enough to stop cleanly from a handler).
class signal_thread {
  public:
    explicit signal_thread(wharf::server::server& srv) : srv_(srv) {
        sigemptyset(&set_);
        sigaddset(&set_, SIGTERM);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGUSR1); // internal: wake to exit
        thread_ = std::thread([this] {
            for (;;) {
                int sig = 0;
                if (sigwait(&set_, &sig) != 0) continue;
                if (sig == SIGUSR1) return;
                srv_.stop();
            }
        });
    }
    ~signal_thread() {
        pthread_kill(thread_.native_handle(), SIGUSR1);
        thread_.join();
    }
    static void block_in_this_thread() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTERM);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGUSR1);
        pthread_sigmask(SIG_BLOCK, &s, nullptr);
    }

  private:
    wharf::server::server& srv_;
    sigset_t set_;
    std::thread thread_;
};

// Where the engine's answers to the management node's reply producer go:
// nowhere (replies are pre-settled; a reply to a missing queue is dropped).
class drop_outbox final : public wharf::engine::outbox {
  public:
    void deliver(std::vector<wharf::engine::event>&&) override {}
};

struct reply_sink {
    const wharf::engine::link_id link = wharf::engine::internal_link_base; // taps count from base + 1
    // In a cluster a reply goes only into a queue of this node (never makes
    // a queue another node owns).
    static bool is_local(const std::vector<wharf::plugins::address_resolver*>& resolvers, const std::string& to) {
        for (auto* r : resolvers) {
            auto res = r->lookup(to);
            if (!res) return false;
            if (res->what == wharf::plugins::resolution::kind::pass) continue;
            return res->what == wharf::plugins::resolution::kind::local;
        }
        return true;
    }
};

} // namespace

int main(int argc, char** argv) {
    auto cfg = wharf::config::load(argc, argv);
    if (!cfg) {
        const auto& err = cfg.error();
        std::fprintf(err.exit_code == 0 ? stdout : stderr, "%s\n", err.message.c_str());
        return err.exit_code;
    }
    auto logger = spdlog::stderr_color_mt("wharfd");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(cfg->log_level));
    std::signal(SIGPIPE, SIG_IGN);
    signal_thread::block_in_this_thread(); // inherited by every thread started below

    std::signal(SIGXFSZ, SIG_IGN); // a file-size limit is a write error, not a crash

    // Plugins are loaded and their options checked before anything slow:
    // a bad plugin or option stops the node at once (exit 2).
    wharf::plugin_host plugins(*cfg);
    if (auto bad = plugins.load_plugins()) {
        spdlog::error("{}", *bad);
        std::fprintf(stderr, "wharfd: %s\n", bad->c_str());
        return 2;
    }

    // Recovery comes next: the node listens only once every stored message
    // is back in its queue.
    wharf::store::recovery_report recovered;
    auto opened = wharf::store::journal_store::open({cfg->data_dir, cfg->node_id}, recovered);
    if (!opened) {
        spdlog::error("{}", opened.error());
        std::fprintf(stderr, "wharfd: %s\n", opened.error().c_str());
        return 2;
    }
    std::unique_ptr<wharf::store::journal_store> store = std::move(opened.value());
    for (const auto& w : recovered.warnings) spdlog::warn("{}: recovery: {}", cfg->node_id, w);
    spdlog::info("{}: recovered {} messages in {} queues from {} segments ({} bytes) in {:.3f} s",
                 cfg->node_id, recovered.messages, recovered.queues.size(), recovered.segments,
                 recovered.bytes, recovered.seconds);

    wharf::engine::engine_options eo;
    eo.node_id = cfg->node_id;
    eo.auto_create_queues = cfg->auto_create_queues;
    eo.queue_defaults = cfg->queue_defaults;
    eo.queues = cfg->queues;
    eo.max_message_size = cfg->max_message_size;
    wharf::engine::queue_engine engine(std::move(eo), *store);
    for (auto& [queue, entries] : recovered.queues) engine.load(queue, std::move(entries));
    recovered.queues.clear();

    const std::string node_id = cfg->node_id;
    wharf::server::server srv(*cfg, engine, [&node_id](const std::string& addr) {
        std::printf("wharfd %s listening on %s\n", node_id.c_str(), addr.c_str());
        std::fflush(stdout);
    });
    plugins.bind(engine, &srv.connections());
    if (auto bad = plugins.start()) {
        spdlog::error("{}", *bad);
        std::fprintf(stderr, "wharfd: %s\n", bad->c_str());
        plugins.stop();
        return 1;
    }
    srv.set_resolvers(plugins.resolvers());

    // The $management node: replies go into local queues (a client's
    // temporary reply queue, typically) through an internal producer.
    reply_sink replies;
    auto reply_outbox = std::make_shared<drop_outbox>();
    engine.post(wharf::engine::cmd_attach_producer{replies.link, "", reply_outbox});
    wharf::management::management_service management(
        [&engine, &replies, &plugins, &node_id](const std::string& reply_to, std::string bytes) {
            if (!replies.is_local(plugins.resolvers(), reply_to)) {
                spdlog::info("{}: management: reply-to '{}' is not a queue of this node; reply dropped", node_id,
                             reply_to);
                return;
            }
            wharf::engine::incoming_message m;
            m.body = wharf::engine::message_ref::copy_of(bytes);
            m.to = reply_to;
            m.settled = true;
            engine.post(wharf::engine::cmd_publish{replies.link, {std::move(m)}});
        });
    wharf::management::queue_entities queue_types(engine);
    wharf::server::connection_entities connection_types(srv, cfg->node_id);
    wharf::server::link_entities link_types(srv, cfg->node_id);
    management.add_type(queue_types);
    management.add_type(connection_types);
    management.add_type(link_types);
    for (auto* t : plugins.entity_types()) management.add_type(*t);
    management.start();
    srv.set_management(&management);
    spdlog::info("{}: starting; worker threads: {}, busy-poll: {}, allocator: {}, declared queues: {}",
                 cfg->node_id, cfg->threads,
                 cfg->busy_poll_in_effect() > 0 ? std::to_string(cfg->busy_poll_in_effect()) + " us"
                 : cfg->threads == 1                ? std::string("off")
                                                    : std::string("off (several workers)"),
                 allocator_name(), cfg->queues.size());
    int rc = 0;
    {
        signal_thread signals(srv);
        rc = srv.run();
    }
    management.stop();
    plugins.stop();
    spdlog::info("{}: stopped", cfg->node_id);
    return rc; // engine first, then the store (its last sync): reverse order of construction
}
