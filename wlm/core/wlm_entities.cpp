#include "wlm/core/wlm_entities.hpp"

#include "wlm/core/cluster_admin.hpp"

namespace wharf::wlm {

namespace {
using plugins::entity;

int64_t as_int(uint64_t v) { return static_cast<int64_t>(v); }

error not_found(std::string_view type, std::string_view name) {
    return {errc::not_found, "no " + std::string(type) + " named '" + std::string(name) + "'"};
}

error unknown_operation(std::string_view type, std::string_view op, const std::vector<std::string>& known) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return {errc::not_implemented,
            "operation '" + std::string(op) + "' is not one of " + std::string(type) + "'s (" + list + ")"};
}

// The admin functions' refusals are the operator's to fix: not-allowed.
template <class T> result<T, error> refused(const result<T, std::string>& r) {
    if (r) return *r;
    return fail(error{errc::not_allowed, r.error()});
}

entity node_entity(const std::string& id, const node_record* n, bool drain) {
    entity e{{"name", id}, {"draining", drain}};
    if (n == nullptr) {
        e["state"] = std::string("down");
        return e;
    }
    std::string groups;
    for (const auto& g : n->load.groups) groups += (groups.empty() ? "" : ",") + g;
    e["host"] = n->host;
    e["port"] = int64_t{n->port};
    e["state"] = drain ? std::string("draining") : std::string(to_string(n->load.st));
    e["queues"] = as_int(n->load.queues);
    e["messages"] = as_int(n->load.messages);
    e["connections"] = as_int(n->load.connections);
    e["groups"] = groups;
    return e;
}

entity owner_entity(const std::string& queue, const owner_record& o, bool owner_live) {
    return {{"name", queue},
            {"node", o.node},
            {"nodeState", std::string(owner_live ? "live" : "down")},
            {"epoch", as_int(o.epoch)},
            {"state", std::string(o.moving() ? "moving" : "active")},
            {"to", o.moving() ? plugins::attribute_value(o.to) : plugins::attribute_value()},
            {"reason", o.reason}};
}
} // namespace

std::vector<std::string> node_entities::attribute_names() const {
    return {"name", "host", "port", "state", "draining", "queues", "messages", "connections", "groups"};
}

result<std::vector<entity>, error> node_entities::query() {
    std::lock_guard l(s_->mu);
    auto v = read_cluster(*s_->store);
    if (!v) return fail(error{errc::internal_error, v.error()});
    std::vector<entity> out;
    for (const auto& [id, n] : v->nodes) out.push_back(node_entity(id, &n, v->drains.count(id) != 0));
    for (const auto& id : v->drains)
        if (!v->nodes.count(id)) out.push_back(node_entity(id, nullptr, true));
    return out;
}

result<entity, error> node_entities::invoke(std::string_view op, std::string_view name, const entity&) {
    if (op != "DRAIN" && op != "UNDRAIN") return fail(unknown_operation(type_name(), op, operation_names()));
    std::lock_guard l(s_->mu);
    auto changed = refused(request_drain(*s_->store, std::string(name), op == "DRAIN"));
    if (!changed) return fail(changed.error());
    return entity{{"name", std::string(name)}, {"draining", op == "DRAIN"}, {"changed", *changed}};
}

std::vector<std::string> owner_entities::attribute_names() const {
    return {"name", "node", "nodeState", "epoch", "state", "to", "reason"};
}

result<std::vector<entity>, error> owner_entities::query() {
    std::lock_guard l(s_->mu);
    auto v = read_cluster(*s_->store);
    if (!v) return fail(error{errc::internal_error, v.error()});
    std::vector<entity> out;
    for (const auto& [q, o] : v->owners) out.push_back(owner_entity(q, o, v->nodes.count(o.node) != 0));
    return out;
}

result<entity, error> owner_entities::invoke(std::string_view op, std::string_view name, const entity& args) {
    if (op != "MOVE") return fail(unknown_operation(type_name(), op, operation_names()));
    auto target = args.find("node");
    if (target == args.end() || !std::holds_alternative<std::string>(target->second))
        return fail(error{errc::invalid_field, "MOVE needs the argument 'node' (a string: the node to move '" +
                                                   std::string(name) + "' to)"});
    std::lock_guard l(s_->mu);
    auto moved = request_move(*s_->store, std::string(name), std::get<std::string>(target->second));
    if (!moved) {
        if (moved.error().find("has no owner") != std::string::npos)
            return fail(not_found(type_name(), name));
        return fail(error{errc::not_allowed, moved.error()});
    }
    return owner_entity(std::string(name), *moved, true);
}

} // namespace wharf::wlm
