#include "broker/management/broker_entities.hpp"

#include "broker/common/names.hpp"

namespace wharf::management {

namespace {
plugins::attribute_value n(uint64_t v) { return plugins::attribute_value{static_cast<int64_t>(v)}; }

error no_queue(const std::string& queue) {
    return {errc::not_found, "no wharf.queue named '" + queue + "' on this node"};
}

void put_policy(plugins::entity& e, const config::queue_policy& p) {
    e["durable"] = p.durable;
    e["maxDepth"] = n(p.max_depth_messages);
    e["maxDepthBytes"] = n(p.max_depth_bytes);
    e["maxDeliveryCount"] = n(p.max_delivery_count);
    e["overflow"] = std::string(p.overflow == config::overflow_policy::block ? "block" : "reject");
    e["deadLetterAddress"] = p.dead_letter_queue;
}
} // namespace

void apply_settings(const plugins::queue_settings& s, config::queue_policy& p) {
    if (s.max_depth) p.max_depth_messages = *s.max_depth;
    if (s.max_depth_bytes) p.max_depth_bytes = *s.max_depth_bytes;
    if (s.max_delivery_count) p.max_delivery_count = static_cast<uint32_t>(std::min<uint64_t>(*s.max_delivery_count, UINT32_MAX));
    if (s.overflow) p.overflow = *s.overflow == "reject" ? config::overflow_policy::reject : config::overflow_policy::block;
    if (s.dead_letter_address) p.dead_letter_queue = *s.dead_letter_address;
}

std::vector<std::string> queue_entities::attribute_names() const {
    std::vector<std::string> out = {"name",         "depth",   "bytes",        "consumers", "producers",
                                    "links",        "enqueued", "delivered",    "acknowledged", "dequeued",
                                    "expired",      "deadLettered", "rejectedFull", "temporary", "durable"};
    for (auto s : plugins::queue_setting_names) out.emplace_back(s);
    return out;
}

result<std::vector<plugins::entity>, error> queue_entities::query() {
    std::vector<plugins::entity> out;
    for (const auto& q : engine_.stats()) {
        plugins::entity e{{"name", q.name},
                          {"depth", n(q.depth)},
                          {"bytes", n(q.depth_bytes)},
                          {"consumers", n(q.consumers)},
                          {"producers", n(q.producers)},
                          {"links", n(q.client_links)},
                          {"enqueued", n(q.counters.enqueued)},
                          {"delivered", n(q.counters.delivered)},
                          {"acknowledged", n(q.counters.acknowledged)},
                          {"dequeued", n(q.counters.acknowledged)}, // the usual name for it
                          {"expired", n(q.counters.expired)},
                          {"deadLettered", n(q.counters.dead_lettered)},
                          {"rejectedFull", n(q.counters.rejected_full)},
                          {"temporary", q.dynamic}};
        put_policy(e, q.policy);
        out.push_back(std::move(e));
    }
    return out;
}

result<plugins::entity, error> queue_entities::invoke(std::string_view op, std::string_view name,
                                                      const plugins::entity& args) {
    const std::string queue(name);
    if (op == "PURGE") {
        auto gone = engine_.purge(queue);
        if (!gone) return fail(no_queue(queue));
        return plugins::entity{{"name", queue}, {"purged", n(*gone)}};
    }
    if (op == "DELETE") {
        if (!engine_.remove(queue)) return fail(no_queue(queue));
        return plugins::entity{{"name", queue}};
    }
    if (op != "CREATE" && op != "UPDATE")
        return fail(error{errc::not_implemented, "operation '" + std::string(op) + "' on wharf.queue"});
    if (auto bad = plugins::unknown_setting(args, op)) return fail(*bad);
    auto settings = plugins::settings_from_args(args, queue);
    if (!settings) return fail(settings.error());
    if (op == "CREATE") {
        if (queue.empty() || queue[0] == '$')
            return fail(error{errc::invalid_field, "'" + queue + "' cannot be a queue's name (empty or starting with '$')"});
        if (queue.size() > engine::max_queue_name)
            return fail(error{errc::invalid_field, "a queue's name is at most " + std::to_string(engine::max_queue_name) +
                                                       " bytes; this one is " + std::to_string(queue.size())});
        if (auto bad = check_queue_name(queue)) return fail(error{errc::invalid_field, *bad});
        if (!engine_.create(queue))
            return fail(error{errc::not_allowed, "queue '" + queue + "' exists already (see READ; UPDATE changes it)"});
    } else if (settings->empty()) {
        std::string names;
        for (auto s : plugins::queue_setting_names) names += (names.empty() ? "" : ", ") + std::string(s);
        return fail(error{errc::invalid_field, "UPDATE of a wharf.queue changes one of: " + names});
    }
    auto policy = engine_.configure(queue, [&](config::queue_policy& p) { apply_settings(*settings, p); });
    if (!policy) return fail(no_queue(queue));
    plugins::entity e{{"name", queue}};
    put_policy(e, *policy);
    return e;
}

} // namespace wharf::management
