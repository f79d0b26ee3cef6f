#include "broker/plugin_host.hpp"

#include "plugins/loader/plugin_loader.hpp"

#include <spdlog/spdlog.h>

namespace wharf {

plugin_host::plugin_host(const config::node_config& cfg) : cfg_(cfg) {
    node_.node_id = cfg.node_id;
    node_.data_dir = cfg.data_dir;
    node_.metadata = cfg.metadata;
    const std::string adv = !cfg.advertise.empty() ? cfg.advertise
                            : cfg.listeners.empty() ? std::string("127.0.0.1:5672")
                                                    : cfg.listeners[0].host + ":" +
                                                          std::to_string(cfg.listeners[0].port);
    if (auto l = config::parse_listen(adv)) {
        node_.host = l->host;
        node_.port = l->port;
    }
}

std::optional<std::string> plugin_host::load_plugins() {
    const std::string dir = cfg_.plugin_dir.empty() ? plugins::default_plugin_dir() : cfg_.plugin_dir;
    for (const auto& name : cfg_.plugins) {
        auto factory = plugins::load_plugin(dir, name);
        if (!factory) return factory.error();
        auto it = cfg_.plugin_options.find(name);
        const plugins::options opts = it != cfg_.plugin_options.end() ? it->second : plugins::options{};
        if (auto bad = (*factory)->validate(opts, node_)) return "plugin '" + name + "': " + *bad;
        plugins_.push_back((*factory)->create(opts, *this));
        names_.push_back(name);
    }
    return std::nullopt;
}

std::optional<std::string> plugin_host::start() {
    for (; started_ < plugins_.size(); ++started_) {
        if (auto bad = plugins_[started_]->start()) return "plugin '" + names_[started_] + "': " + *bad;
        spdlog::info("{}: plugin {} started", node_.node_id, names_[started_]);
    }
    return std::nullopt;
}

void plugin_host::stop() {
    while (started_ > 0) plugins_[--started_]->stop();
}

plugins::load_figures plugin_host::load_now() {
    plugins::load_figures f;
    if (engine_ == nullptr) return f;
    for (const auto& q : engine_->stats()) {
        if (q.dynamic) continue;
        ++f.queues;
        f.messages += q.depth;
    }
    f.connections = connections_ ? connections_->load() : 0;
    return f;
}

void plugin_host::detach_links(std::vector<std::string> queues, error err) {
    if (engine_ != nullptr) engine_->post_detached(engine::cmd_detach_queues{std::move(queues), std::move(err)});
}

} // namespace wharf
