#pragma once
// plugin_host: loads the configured plugins, validates their options, and
// is the node_context they see (the node's identity, the resolver chain,
// load figures, detaching links, taps and queue removal through the queue
// engine, timers).
//
// Main thread for load/start/stop; the node_context methods are thread-safe.

#include "broker/common/periodic_timers.hpp"
#include "broker/config/node_config.hpp"
#include "broker/engine/queue_engine.hpp"
#include "plugins/api/plugin.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace wharf {

class plugin_host final : public plugins::node_context {
  public:
    explicit plugin_host(const config::node_config& cfg);
    // Before start(): what the node_context methods reach.
    void bind(engine::queue_engine& engine, const std::atomic<size_t>* connections) {
        engine_ = &engine;
        connections_ = connections;
    }

    // Loads, validates and creates every configured plugin. A message naming
    // the plugin (and key) on failure: the node must not start.
    std::optional<std::string> load_plugins();
    std::optional<std::string> start();
    void stop();

    const std::vector<plugins::address_resolver*>& resolvers() const { return resolvers_; }
    // What plugins offer AMQP management (served from issue #6 on).
    const std::vector<plugins::entity_type*>& entity_types() const { return entity_types_; }

    // node_context
    const plugins::node_info& node() const override { return node_; }
    void add_resolver(plugins::address_resolver& r) override { resolvers_.push_back(&r); }
    void add_entity_type(plugins::entity_type& t) override { entity_types_.push_back(&t); }
    plugins::load_figures load_now();
    plugins::load_figures load() override { return load_now(); }
    void detach_links(std::vector<std::string> queues, error err,
                      std::optional<plugins::redirect_target> target) override;
    std::vector<plugins::local_queue> queues() override;
    uint64_t queue_set_version() const override { return engine_ ? engine_->queue_set_version() : 0; }
    std::unique_ptr<plugins::queue_tap> tap(
        const std::string& queue, std::function<void(std::vector<plugins::tapped_message>)> on_messages) override;
    bool delete_queue_if_idle(const std::string& queue) override;
    bool configure_queue(const std::string& queue, const plugins::queue_settings& settings) override;
    bool remove_queue(const std::string& queue) override;
    plugins::timer_id run_every(std::chrono::milliseconds period, std::function<void()> fn) override {
        return timers_.add(period, std::move(fn));
    }
    void cancel(plugins::timer_id id) override { timers_.cancel(id); }

  private:
    const config::node_config& cfg_;
    engine::queue_engine* engine_ = nullptr;
    const std::atomic<size_t>* connections_ = nullptr;
    plugins::node_info node_;
    std::vector<std::unique_ptr<plugins::plugin>> plugins_;
    std::vector<std::string> names_;
    std::vector<plugins::address_resolver*> resolvers_;
    std::vector<plugins::entity_type*> entity_types_;
    size_t started_ = 0;
    std::atomic<uint64_t> tap_ids_{0};
    periodic_timers timers_;
};

} // namespace wharf
