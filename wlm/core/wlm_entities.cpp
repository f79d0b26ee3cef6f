#include "wlm/core/wlm_entities.hpp"

#include "broker/common/names.hpp"
#include "broker/common/text.hpp"
#include "plugins/api/queue_settings.hpp"
#include "wlm/core/cluster_admin.hpp"
#include "wlm/core/rebalance.hpp"
#include "wlm/placement/placement_policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
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
    return {"name",        "host",   "port",        "state",    "draining", "queues", "messages",
            "connections", "groups", "leaseExpiry", "loadScore"};
}

result<std::vector<entity>, error> node_entities::query() {
    std::lock_guard l(s_->mu);
    auto v = read_cluster(*s_->store);
    if (!v) return fail(error{errc::internal_error, v.error()});
    auto settings = read_placement(*s_->store, config_.policy, config_.weights);
    if (!settings) return fail(error{errc::internal_error, settings.error()});
    std::vector<entity> out;
    // Live members, with the figures placement uses (queues owned by the
    // records rather than the heartbeat's count).
    for (const auto& load : placement_loads(v->nodes, v->owners, v->drains)) {
        const node_record& n = v->nodes.at(load.node_id);
        entity e = node_entity(load.node_id, &n, v->drains.count(load.node_id) != 0);
        auto expiry = s_->store->lease_expiry(n.lease);
        if (expiry) e["leaseExpiry"] = *expiry;
        else if (expiry.error().code == store_errc::lease_expired) e["leaseExpiry"] = plugins::attribute_value();
        else return fail(error{errc::internal_error, "metadata store: " + expiry.error().description});
        e["loadScore"] = format_score(load_score(load, settings->weights));
        out.push_back(std::move(e));
    }
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
    const bool update = op == "UPDATE";
    if (update) {
        auto it = args.find("state");
        auto* st = it == args.end() ? nullptr : std::get_if<std::string>(&it->second);
        if (st == nullptr || (*st != "draining" && *st != "active"))
            return fail(error{errc::invalid_field, "UPDATE of a wharf.node takes 'state': \"draining\" or \"active\""});
        op = *st == "draining" ? "DRAIN" : "UNDRAIN";
    }
    if (op != "DRAIN" && op != "UNDRAIN") return fail(unknown_operation(type_name(), op, operation_names()));
    std::lock_guard l(s_->mu);
    if (op == "UNDRAIN" || update) {
        // Only a node QUERY lists can change (DRAIN of one that is not a
        // live member says so itself).
        auto v = read_cluster(*s_->store);
        if (!v) return fail(error{errc::internal_error, v.error()});
        const std::string id(name);
        const bool listed = v->nodes.count(id) != 0 || v->drains.count(id) != 0 ||
                            std::any_of(v->owners.begin(), v->owners.end(),
                                        [&](const auto& o) { return o.second.node == id; });
        if (!listed) return fail(not_found(type_name(), name));
    }
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
    if (queue.size() > max_queue_name)
        return fail(error{errc::invalid_field, "a queue's name is at most " + std::to_string(max_queue_name) +
                                                   " bytes; this one is " + std::to_string(queue.size())});
    // A name no link could attach to (a control character, a NUL, not
    // UTF-8) is not placed: it used to be, and stayed a queue nobody
    // could use, counted by placement and planned for by REBALANCE.
    if (auto why = check_queue_name(queue))
        return fail(error{errc::invalid_field, quoted(printable(queue, 200)) + " cannot be a queue's name: " + *why});
    if (auto bad = plugins::unknown_setting(args, "CREATE")) return fail(*bad);
    auto settings = plugins::settings_from_args(args, queue);
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
    // The owner applies the settings when the queue first shows up there. A
    // record left by a deleted queue of that name (a DELETE that raced an
    // UPDATE) is replaced, or removed when this CREATE sets nothing.
    const std::string key = std::string(settings_prefix) + queue;
    auto old = s_->store->get(key);
    if (!old) return fail(error{errc::internal_error, "queue '" + queue + "' created, its settings not saved: " +
                                                          old.error().description});
    const uint64_t old_version = *old ? (*old)->version : 0;
    if (!settings->empty()) {
        auto saved = s_->store->compare_and_set(key, old_version, encode(*settings));
        if (!saved) return fail(error{errc::internal_error, "queue '" + queue + "' created, its settings not saved: " +
                                                                saved.error().description});
        plugins::put_settings(e, *settings);
    } else if (old_version != 0) {
        (void)s_->store->compare_and_delete(key, old_version);
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
    static constexpr std::array<std::string_view, 3> route_arguments = {"node", "group", "mode"};
    if (auto key = plugins::unknown_argument(args, route_arguments))
        return fail(error{errc::invalid_field, "'" + *key + "' is not an argument of wharf.route " + std::string(op) +
                                                   " (arguments: node or group, mode)"});
    route_record r = existing.value_or(route_record{});
    r.rule.pattern = pattern;
    const auto node = text_arg(args, "node");
    const auto group = text_arg(args, "group");
    const auto mode = text_arg(args, "mode");
    if (op == "UPDATE" && !node && !group && !mode)
        return fail(error{errc::invalid_field, "UPDATE of a wharf.route changes one of: node, group, mode"});
    if (node && group) return fail(error{errc::invalid_field, "give 'node' or 'group', not both"});
    if (node || group) {
        const std::string& target = node ? *node : *group;
        if (target.empty() || target == "\x01")
            return fail(error{errc::invalid_field, std::string("'") + (node ? "node" : "group") + "' must be a non-empty string"});
        // The target is stored as a field of the route's record: a name
        // holding the record's separators would add fields of its own.
        if (auto bad = node ? check_node_id(target) : check_group_name(target))
            return fail(error{errc::invalid_field, std::string("'") + (node ? "node" : "group") + "': " + *bad});
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

namespace {
constexpr int64_t max_rebalance_moves = 1000;

struct weight_attribute {
    const char* name;
    double placement_weights::*member;
};
constexpr weight_attribute weight_attributes[] = {{"weightQueues", &placement_weights::queues},
                                                  {"weightMessages", &placement_weights::messages},
                                                  {"weightMessageRate", &placement_weights::message_rate},
                                                  {"weightConnections", &placement_weights::connections}};

entity placement_entity(const placement_settings& s) {
    entity e{{"name", std::string("placement")},
             {"policy", std::string(to_string(s.policy))},
             {"source", std::string(s.policy_from_store ? "management" : "config")},
             {"weightsSource", std::string(s.weights_from_store ? "management" : "config")}};
    for (const auto& w : weight_attributes) e[w.name] = format_score(s.weights.*w.member);
    return e;
}

// A weight argument: a number, or a decimal number as text.
result<double, error> weight_arg(const char* name, const plugins::attribute_value& v) {
    const auto bad = [&](const std::string& why) {
        return fail(error{errc::invalid_field, std::string("'") + name + "': " + why});
    };
    if (auto* i = std::get_if<int64_t>(&v)) {
        if (*i < 0) return bad(std::to_string(*i) + " is not a number >= 0");
        if (static_cast<double>(*i) > max_weight) return bad(std::to_string(*i) + " is more than the largest weight, 1e9");
        return static_cast<double>(*i);
    }
    if (auto* x = std::get_if<double>(&v)) {
        if (!std::isfinite(*x) || *x < 0) return bad(format_score(*x) + " is not a finite number >= 0");
        if (*x > max_weight) return bad(format_score(*x) + " is more than the largest weight, 1e9");
        return *x;
    }
    if (auto* t = std::get_if<std::string>(&v)) {
        auto w = parse_weight(*t);
        if (!w) return bad(w.error());
        return *w;
    }
    return bad("a weight is a number >= 0");
}
} // namespace

std::vector<std::string> placement_entities::attribute_names() const {
    std::vector<std::string> out{"name", "policy", "source"};
    for (const auto& w : weight_attributes) out.emplace_back(w.name);
    out.emplace_back("weightsSource");
    return out;
}

result<std::vector<entity>, error> placement_entities::query() {
    std::lock_guard l(s_->mu);
    auto s = read_placement(*s_->store, configured_.policy, configured_.weights);
    if (!s) return fail(error{errc::internal_error, s.error()});
    return std::vector<entity>{placement_entity(*s)};
}

result<entity, error> placement_entities::invoke(std::string_view op, std::string_view, const entity& args) {
    if (op == "UPDATE") return update(args);
    if (op == "REBALANCE") return rebalance(args);
    return fail(unknown_operation(type_name(), op, operation_names()));
}

result<entity, error> placement_entities::update(const entity& args) {
    std::vector<std::string_view> accepted{"policy"};
    for (const auto& w : weight_attributes) accepted.emplace_back(w.name);
    if (auto key = plugins::unknown_argument(args, accepted))
        return fail(error{errc::invalid_field, "'" + *key + "' is not a setting UPDATE of wharf.placement can change "
                                               "(settings: policy, weightQueues, weightMessages, weightMessageRate, "
                                               "weightConnections)"});
    std::optional<policy_kind> policy;
    if (const auto text = text_arg(args, "policy")) {
        if (*text == "\x01") return fail(error{errc::invalid_field, "'policy' must be a string"});
        auto parsed = parse_policy_kind(*text);
        if (!parsed) return fail(error{errc::invalid_field, "'policy': " + parsed.error()});
        policy = *parsed;
    }
    std::vector<std::pair<double placement_weights::*, double>> weights;
    for (const auto& w : weight_attributes) {
        auto it = args.find(w.name);
        if (it == args.end()) continue;
        auto v = weight_arg(w.name, it->second);
        if (!v) return fail(v.error());
        weights.emplace_back(w.member, *v);
    }
    if (!policy && weights.empty())
        return fail(error{errc::invalid_field, "UPDATE of wharf.placement takes 'policy' (a string) and/or weights: "
                                               "weightQueues, weightMessages, weightMessageRate, weightConnections"});
    std::lock_guard l(s_->mu);
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto cur = s_->store->get(placement_key);
        if (!cur) return fail(error{errc::internal_error, "metadata store: " + cur.error().description});
        placement_record rec;
        if (*cur) rec = decode_placement((*cur)->value).value_or(placement_record{});
        if (policy) rec.policy = policy;
        if (!weights.empty()) {
            // Weights not given keep their value in force (this node's config
            // until management sets them).
            placement_weights w = rec.weights.value_or(configured_.weights);
            for (const auto& [member, value] : weights) w.*member = value;
            rec.weights = w;
        }
        auto put = s_->store->compare_and_set(placement_key, *cur ? (*cur)->version : 0, encode(rec));
        if (put) {
            auto now = read_placement(*s_->store, configured_.policy, configured_.weights);
            if (!now) return fail(error{errc::internal_error, now.error()});
            return placement_entity(*now);
        }
        if (put.error().code != store_errc::conflict)
            return fail(error{errc::internal_error, "metadata store: " + put.error().description});
    }
    return fail(error{errc::not_allowed, "wharf.placement keeps changing meanwhile; try again"});
}

result<entity, error> placement_entities::rebalance(const entity& args) {
    int64_t max = 16;
    if (auto it = args.find("max"); it != args.end()) {
        auto* n = std::get_if<int64_t>(&it->second);
        if (n == nullptr || *n < 1 || *n > max_rebalance_moves)
            return fail(error{errc::invalid_field, "'max' must be a whole number from 1 to " +
                                                       std::to_string(max_rebalance_moves) +
                                                       " (the most moves to start; default 16)"});
        max = *n;
    }
    bool dry_run = false;
    if (auto it = args.find("dryRun"); it != args.end()) {
        auto* b = std::get_if<bool>(&it->second);
        if (b == nullptr) return fail(error{errc::invalid_field, "'dryRun' must be true or false"});
        dry_run = *b;
    }
    std::lock_guard l(s_->mu);
    auto v = read_cluster(*s_->store);
    if (!v) return fail(error{errc::internal_error, v.error()});
    auto routes = s_->store->list(routes_prefix);
    if (!routes) return fail(error{errc::internal_error, "metadata store: " + routes.error().description});
    std::vector<placement_rule> rules; // as placement tries them: routes, then this node's configured rules
    for (const auto& kv : *routes)
        if (auto r = decode_route(kv.key.substr(routes_prefix.size()), kv.value)) rules.push_back(r->rule);
    rules.insert(rules.end(), configured_.rules.begin(), configured_.rules.end());
    auto plan = plan_rebalance(placement_loads(v->nodes, v->owners, v->drains), v->owners, rules,
                               static_cast<size_t>(max));
    if (dry_run)
        return entity{{"name", std::string("placement")}, {"dryRun", true},
                      {"moves", static_cast<int64_t>(plan.size())}, {"plan", describe(plan)}};
    // The owners carry the moves out at their next tick, as for MOVE. A move
    // refused meanwhile (the queue started moving, a node left) is reported.
    std::vector<rebalance_move> started;
    std::string refused_moves;
    for (const auto& m : plan) {
        auto r = request_move(*s_->store, m.queue, m.to);
        if (r) started.push_back(m);
        else refused_moves += (refused_moves.empty() ? "" : "; ") + m.queue + "->" + m.to + ": " + r.error();
    }
    entity e{{"name", std::string("placement")}, {"dryRun", false},
             {"moves", static_cast<int64_t>(started.size())}, {"plan", describe(started)}};
    if (!refused_moves.empty()) e["refused"] = refused_moves;
    return e;
}

} // namespace wharf::wlm
