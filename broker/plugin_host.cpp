#include "broker/plugin_host.hpp"

#include "broker/amqp/message_codec.hpp"
#include "broker/management/broker_entities.hpp"
#include "plugins/loader/plugin_loader.hpp"

#include <spdlog/spdlog.h>

#include <future>
#include <mutex>

namespace wharf {

namespace {

// Where the engine's answers to a tap go: deliveries become tapped_messages
// for the plugin's callback, until the tap is closed.
class tap_outbox final : public engine::outbox {
  public:
    explicit tap_outbox(std::function<void(std::vector<plugins::tapped_message>)> fn) : fn_(std::move(fn)) {}
    void deliver(std::vector<engine::event>&& events) override {
        std::vector<plugins::tapped_message> out;
        for (auto& ev : events) {
            auto* d = std::get_if<engine::ev_deliver>(&ev);
            if (d == nullptr) continue;
            std::string_view bytes = d->body.bytes();
            std::string copy;
            if (d->redelivered) {
                // As a consumer would see it: the failed deliveries counted.
                if (auto info = amqp::scan_message(bytes)) {
                    amqp::header_fields h = info->header;
                    h.delivery_count = d->delivery_count;
                    h.first_acquirer = false;
                    copy = amqp::with_header(bytes, *info, h);
                }
            }
            if (copy.empty()) copy.assign(bytes);
            out.push_back({d->seq, std::move(copy)});
        }
        std::lock_guard l(mu_);
        if (fn_ && !out.empty()) fn_(std::move(out));
    }
    void close() {
        std::lock_guard l(mu_); // waits for a callback in progress
        fn_ = nullptr;
    }

  private:
    std::mutex mu_;
    std::function<void(std::vector<plugins::tapped_message>)> fn_;
};

class engine_tap final : public plugins::queue_tap {
  public:
    engine_tap(engine::queue_engine& e, engine::link_id id, std::shared_ptr<tap_outbox> out)
        : engine_(e), id_(id), out_(std::move(out)) {}
    ~engine_tap() override {
        out_->close();
        // What the tap holds unsettled goes back to the queue.
        engine_.post_detached(engine::cmd_detach{id_, {}});
    }
    void credit(uint64_t more) override {
        std::lock_guard l(mu_);
        limit_ += more;
        engine_.post_detached(engine::cmd_credit{id_, limit_, false});
    }
    void settle(uint64_t seq, bool done) override {
        engine_.post_detached(engine::cmd_settle{
            id_, {{seq, done ? engine::outcome_kind::accepted : engine::outcome_kind::released}}, {}});
    }

  private:
    engine::queue_engine& engine_;
    const engine::link_id id_;
    std::shared_ptr<tap_outbox> out_;
    std::mutex mu_;
    uint64_t limit_ = 0;
};

} // namespace

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
    const auto t = engine_->totals();
    f.queues = t.queues;
    f.messages = t.messages;
    f.connections = connections_ ? connections_->load() : 0;
    return f;
}

void plugin_host::detach_links(std::vector<std::string> queues, error err,
                               std::optional<plugins::redirect_target> target) {
    if (engine_ == nullptr) return;
    std::optional<engine::redirect_to> to;
    if (target) to = engine::redirect_to{target->host, target->port};
    engine_->post_detached(engine::cmd_detach_queues{std::move(queues), std::move(err), std::move(to)});
}

std::vector<plugins::local_queue> plugin_host::queues() {
    std::vector<plugins::local_queue> out;
    if (engine_ == nullptr) return out;
    for (auto& q : engine_->stats()) out.push_back({std::move(q.name), q.depth, q.client_links, q.dynamic});
    return out;
}

std::unique_ptr<plugins::queue_tap> plugin_host::tap(
    const std::string& queue, std::function<void(std::vector<plugins::tapped_message>)> on_messages) {
    const engine::link_id id = engine::internal_link_base + tap_ids_.fetch_add(1) + 1;
    auto out = std::make_shared<tap_outbox>(std::move(on_messages));
    engine::cmd_attach_consumer attach;
    attach.link = id;
    attach.address = queue;
    attach.out = out;
    engine_->post_detached(std::move(attach));
    return std::make_unique<engine_tap>(*engine_, id, std::move(out));
}

bool plugin_host::delete_queue_if_idle(const std::string& queue) {
    if (engine_ == nullptr) return true;
    auto gone = std::make_shared<std::promise<bool>>();
    auto fut = gone->get_future();
    engine_->post_detached(engine::cmd_delete_queue_if_idle{
        queue, std::make_shared<std::function<void(bool)>>([gone](bool g) { gone->set_value(g); })});
    return fut.get();
}

bool plugin_host::configure_queue(const std::string& queue, const plugins::queue_settings& settings) {
    if (engine_ == nullptr) return false;
    return engine_->configure(queue, [&](config::queue_policy& p) { management::apply_settings(settings, p); })
        .has_value();
}

bool plugin_host::remove_queue(const std::string& queue) { return engine_ != nullptr && engine_->remove(queue); }

} // namespace wharf
