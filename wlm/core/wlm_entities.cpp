#include "wlm/core/wlm_entities.hpp"

#include "plugins/api/queue_settings.hpp"
#include "wlm/core/cluster_admin.hpp"
#include "wlm/placement/placement_policy.hpp"

#include <optional>
#include <set>

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
    // Nodes known but not live: asked to drain, or owning queues (down).
    std::set<std::string> down;
    for (const auto& id : v->drains)
        if (!v->nodes.count(id)) down.insert(id);
    for (const auto& [q, o] : v->owners)
        if (!v->nodes.count(o.node)) down.insert(o.node);
    for (const auto& id : down) out.push_back(node_entity(id, nullptr, v->drains.count(id) != 0));
    return out;
}

result<entity, error> node_entities::invoke(std::string_view op, std::string_view name, const entity& args) {
    if (op == "UPDATE") {
        auto it = args.find("state");
        auto* st = it == args.end() ? nullptr : std::get_if<std::string>(&it->second);
        if (st == nullptr || (*st != "draining" && *st != "active"))
            return fail(error{errc::invalid_field, "UPDATE of a wharf.node takes 'state': \"draining\" or \"active\""});
        op = *st == "draining" ? "DRAIN" : "UNDRAIN";
    }
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

result<entity, error> owner_entities::create(const std::string& queue, const entity& args) {
    std::string node;
    if (auto it = args.find("node"); it != args.end()) {
        auto* s = std::get_if<std::string>(&it->second);
        if (s == nullptr || s->empty())
            return fail(error{errc::invalid_field, "'node' must be a node id (a string)"});
        node = *s;
    }
    if (queue.empty() || queue[0] == '$')
        return fail(error{errc::invalid_field, "'" + queue + "' cannot be a cluster queue's name"});
    auto settings = plugins::settings_from_args(args);
    if (!settings) return fail(settings.error());
    auto decided = place_(queue, node);
    if (!decided) return fail(decided.error());
    owner_record rec;
    rec.node = decided->first;
    rec.epoch = 1;
    rec.reason = decided->second;
    std::lock_guard l(s_->mu);
    auto put = s_->store->compare_and_set(std::string(owners_prefix) + queue, 0, encode(rec));
    if (!put) {
        if (put.error().code == store_errc::conflict)
            return fail(error{errc::not_allowed, "queue '" + queue + "' exists already (see READ)"});
        return fail(error{errc::internal_error, "metadata store: " + put.error().description});
    }
    entity e = owner_entity(queue, rec, true);
    if (!settings->empty()) {
        // The owner applies them when the queue first shows up there.
        auto saved = s_->store->compare_and_set(std::string(settings_prefix) + queue, 0, encode(*settings));
        if (!saved && saved.error().code == store_errc::conflict) { // left by a deleted queue of that name
            if (auto old = s_->store->get(std::string(settings_prefix) + queue); old && *old)
                saved = s_->store->compare_and_set(std::string(settings_prefix) + queue, (*old)->version,
                                                   encode(*settings));
        }
        if (!saved) return fail(error{errc::internal_error, "queue '" + queue + "' created, its settings not saved: " +
                                                                saved.error().description});
        plugins::put_settings(e, *settings);
    }
    return e;
}

result<entity, error> owner_entities::invoke(std::string_view op, std::string_view name, const entity& args) {
    if (op == "CREATE" && place_) return create(std::string(name), args);
    if (op != "MOVE") return fail(unknown_operation(type_name(), op, operation_names()));
    auto target = args.find("node");
    if (target == args.end() || !std::holds_alternative<std::string>(target->second))
        return fail(error{errc::invalid_field, "MOVE needs the argument 'node' (a string: the node to move '" +
                                                   std::string(name) + "' to)"});
    std::lock_guard l(s_->mu);
    const std::string& to = std::get<std::string>(target->second);
    auto moved = request_move(*s_->store, std::string(name), to);
    if (!moved) {
        if (moved.error().find("has no owner") != std::string::npos)
            return fail(not_found(type_name(), name));
        if (moved.error().find("is already on node " + to) != std::string::npos) {
            // Already there: nothing to do (so a script may ask again).
            auto view = read_cluster(*s_->store);
            if (view && view->owners.count(std::string(name))) {
                entity e = owner_entity(std::string(name), view->owners.at(std::string(name)), true);
                e["changed"] = false;
                return e;
            }
        }
        return fail(error{errc::not_allowed, moved.error()});
    }
    return owner_entity(std::string(name), *moved, true);
}

// ---- wharf.route -----------------------------------------------------------------

namespace {
std::optional<std::string> text_arg(const entity& args, const char* key) {
    auto it = args.find(key);
    if (it == args.end()) return std::nullopt;
    if (auto* s = std::get_if<std::string>(&it->second)) return *s;
    return std::string("\x01"); // present but not a string
}

entity route_entity(const route_record& r) {
    const bool node = r.rule.target == placement_rule::target_kind::node;
    return {{"name", r.rule.pattern},
            {"pattern", r.rule.pattern},
            {"node", node ? plugins::attribute_value(r.rule.target_name) : plugins::attribute_value()},
            {"group", node ? plugins::attribute_value() : plugins::attribute_value(r.rule.target_name)},
            {"mode", r.mode.empty() ? plugins::attribute_value() : plugins::attribute_value(r.mode)}};
}
} // namespace

std::vector<std::string> route_entities::attribute_names() const { return {"name", "pattern", "node", "group", "mode"}; }

result<std::vector<entity>, error> route_entities::query() {
    std::lock_guard l(s_->mu);
    auto all = s_->store->list(routes_prefix);
    if (!all) return fail(error{errc::internal_error, "metadata store: " + all.error().description});
    std::vector<entity> out;
    for (const auto& kv : *all)
        if (auto r = decode_route(kv.key.substr(routes_prefix.size()), kv.value)) out.push_back(route_entity(*r));
    return out;
}

result<entity, error> route_entities::invoke(std::string_view op, std::string_view name, const entity& args) {
    const std::string pattern(name);
    const std::string key = std::string(routes_prefix) + pattern;
    std::lock_guard l(s_->mu);
    auto cur = s_->store->get(key);
    if (!cur) return fail(error{errc::internal_error, "metadata store: " + cur.error().description});
    std::optional<route_record> existing;
    if (*cur) existing = decode_route(pattern, (*cur)->value);
    if (op == "DELETE") {
        if (!*cur) return fail(error{errc::not_found, "no wharf.route named '" + pattern + "'"});
        auto del = s_->store->compare_and_delete(key, (*cur)->version);
        if (!del) return fail(error{errc::internal_error, "metadata store: " + del.error().description});
        return entity{{"name", pattern}};
    }
    if (op == "CREATE" && *cur) return fail(error{errc::not_allowed, "wharf.route '" + pattern + "' exists; UPDATE it"});
    if (op == "UPDATE" && !*cur) return fail(error{errc::not_found, "no wharf.route named '" + pattern + "'"});
    route_record r = existing.value_or(route_record{});
    r.rule.pattern = pattern;
    const auto node = text_arg(args, "node");
    const auto group = text_arg(args, "group");
    const auto mode = text_arg(args, "mode");
    if (node && group) return fail(error{errc::invalid_field, "give 'node' or 'group', not both"});
    if (node || group) {
        const std::string& target = node ? *node : *group;
        if (target.empty() || target == "\x01")
            return fail(error{errc::invalid_field, std::string("'") + (node ? "node" : "group") + "' must be a non-empty string"});
        r.rule.target = node ? placement_rule::target_kind::node : placement_rule::target_kind::group;
        r.rule.target_name = target;
    } else if (op == "CREATE") {
        return fail(error{errc::invalid_field, "CREATE of a wharf.route needs 'node' or 'group' (a string)"});
    }
    if (mode) {
        if (*mode != "relay" && *mode != "redirect")
            return fail(error{errc::invalid_field, "'mode' must be \"relay\" or \"redirect\""});
        r.mode = *mode;
    }
    auto put = s_->store->compare_and_set(key, *cur ? (*cur)->version : 0, encode(r));
    if (!put) {
        if (put.error().code == store_errc::conflict)
            return fail(error{errc::not_allowed, "wharf.route '" + pattern + "' changed meanwhile; try again"});
        return fail(error{errc::internal_error, "metadata store: " + put.error().description});
    }
    return route_entity(r);
}

// ---- wharf.placement -------------------------------------------------------------

result<std::vector<entity>, error> placement_entities::query() {
    std::lock_guard l(s_->mu);
    auto cur = s_->store->get(placement_key);
    if (!cur) return fail(error{errc::internal_error, "metadata store: " + cur.error().description});
    std::string policy = configured_, source = "config";
    if (*cur && (*cur)->value.rfind("policy=", 0) == 0) {
        policy = (*cur)->value.substr(7);
        source = "management";
    }
    return std::vector<entity>{{{"name", std::string("placement")}, {"policy", policy}, {"source", source}}};
}

result<entity, error> placement_entities::invoke(std::string_view op, std::string_view, const entity& args) {
    if (op != "UPDATE") return fail(unknown_operation(type_name(), op, operation_names()));
    const auto policy = text_arg(args, "policy");
    if (!policy) return fail(error{errc::invalid_field, "UPDATE of wharf.placement needs 'policy' (a string)"});
    auto parsed = parse_policy_kind(*policy);
    if (!parsed) return fail(error{errc::invalid_field, "'policy': " + parsed.error()});
    {
        std::lock_guard l(s_->mu);
        for (int attempt = 0; attempt < 5; ++attempt) {
            auto cur = s_->store->get(placement_key);
            if (!cur) return fail(error{errc::internal_error, "metadata store: " + cur.error().description});
            auto put = s_->store->compare_and_set(placement_key, *cur ? (*cur)->version : 0, "policy=" + *policy);
            if (put) break;
            if (put.error().code != store_errc::conflict)
                return fail(error{errc::internal_error, "metadata store: " + put.error().description});
        }
    }
    return entity{{"name", std::string("placement")}, {"policy", *policy}, {"source", std::string("management")}};
}

} // namespace wharf::wlm
