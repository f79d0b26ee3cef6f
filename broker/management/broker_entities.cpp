#include "broker/management/broker_entities.hpp"

namespace wharf::management {

std::vector<std::string> queue_entities::attribute_names() const {
    return {"name", "depth", "bytes", "consumers", "links", "enqueued", "delivered", "acknowledged",
            "expired", "deadLettered", "rejectedFull", "temporary"};
}

result<std::vector<plugins::entity>, error> queue_entities::query() {
    std::vector<plugins::entity> out;
    auto n = [](uint64_t v) { return plugins::attribute_value{static_cast<int64_t>(v)}; };
    for (const auto& q : engine_.stats()) {
        out.push_back({{"name", q.name},
                       {"depth", n(q.depth)},
                       {"bytes", n(q.depth_bytes)},
                       {"consumers", n(q.consumers)},
                       {"links", n(q.client_links)},
                       {"enqueued", n(q.counters.enqueued)},
                       {"delivered", n(q.counters.delivered)},
                       {"acknowledged", n(q.counters.acknowledged)},
                       {"expired", n(q.counters.expired)},
                       {"deadLettered", n(q.counters.dead_lettered)},
                       {"rejectedFull", n(q.counters.rejected_full)},
                       {"temporary", q.dynamic}});
    }
    return out;
}

result<plugins::entity, error> queue_entities::invoke(std::string_view op, std::string_view name,
                                                      const plugins::entity&) {
    const std::string queue(name);
    if (op == "PURGE") {
        auto n = engine_.purge(queue);
        if (!n) return fail(error{errc::not_found, "no wharf.queue named '" + queue + "' on this node"});
        return plugins::entity{{"name", queue}, {"purged", static_cast<int64_t>(*n)}};
    }
    if (op == "DELETE") {
        if (!engine_.remove(queue))
            return fail(error{errc::not_found, "no wharf.queue named '" + queue + "' on this node"});
        return plugins::entity{{"name", queue}};
    }
    return fail(error{errc::not_implemented, "operation '" + std::string(op) + "' on wharf.queue"});
}

} // namespace wharf::management
