#include "wlm/core/queue_admin.hpp"

#include "plugins/api/queue_settings.hpp"
#include "wlm/core/cluster_admin.hpp"
#include "wlm/core/peer_entities.hpp"

#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>

#include <spdlog/spdlog.h>

#include <future>
#include <map>

namespace wharf::wlm {

namespace {
using plugins::entity;

mgmt_props request_props(const char* op, const std::string& queue) {
    return {{"operation", proton::scalar(std::string(op))},
            {"type", proton::scalar(std::string("wharf.queue"))},
            {"name", proton::scalar(queue)}};
}

error store_failed(const store_error& e) { return {errc::internal_error, "metadata store: " + e.description}; }
} // namespace

std::optional<queue_admin::owner_at> queue_admin::owner_of(const std::string& queue) {
    std::lock_guard l(s_->mu);
    auto rec = s_->store->get(std::string(owners_prefix) + queue);
    if (!rec || !*rec) return std::nullopt;
    auto o = decode_owner((*rec)->value);
    if (!o) return std::nullopt;
    o->version = (*rec)->version;
    owner_at out{*o, {}, 0};
    if (auto n = s_->store->get(std::string(nodes_prefix) + o->node); n && *n)
        if (auto node = decode_node(o->node, (*n)->value)) {
            out.host = node->host;
            out.port = node->port;
        }
    return out;
}

bool queue_admin::handles(std::string_view op, std::string_view name) {
    auto o = owner_of(std::string(name));
    if (!o) return false;                                   // not a cluster queue: the broker's
    if (op == "PURGE") return o->rec.node != node_id_ || !held_here(name); // held here: the broker purges
    return true;
}

bool queue_admin::held_here(std::string_view queue) {
    for (const auto& q : ctx_.queues())
        if (q.name == queue) return true;
    return false;
}

result<std::vector<entity>, error> queue_admin::read(std::string_view name) {
    const std::string queue(name);
    auto o = owner_of(queue);
    if (!o || o->rec.node == node_id_ || o->host.empty()) return std::vector<entity>{}; // the broker's, or none
    auto reply = ask_node(o->rec.node, o->host, o->port, request_props("READ", queue));
    if (reply && !reply->ok() && reply->status != 404) reply = fail(error_of(o->rec.node, *reply));
    if (!reply) {
        spdlog::info("{}: management: no figures of '{}' from {}: {}", node_id_, queue, o->rec.node,
                     reply.error().description);
        return std::vector<entity>{};
    }
    if (!reply->ok()) return std::vector<entity>{}; // owned there, not used yet
    entity e;
    if (const auto* m = reply->body.as_map())
        for (const auto& [k, v] : *m) e[k] = attribute_of(v);
    e["name"] = queue;
    return std::vector<entity>{std::move(e)};
}

result<std::vector<entity>, error> queue_admin::query() {
    cluster_view view;
    {
        std::lock_guard l(s_->mu);
        auto v = read_cluster(*s_->store);
        if (!v) return fail(error{errc::internal_error, v.error()});
        view = std::move(*v);
    }
    // The queues each other live node owns; one request per node, all at once.
    std::map<std::string, std::set<std::string>> owned;
    for (const auto& [q, o] : view.owners)
        if (o.node != node_id_ && view.nodes.count(o.node)) owned[o.node].insert(q);
    std::vector<node_address> ask;
    for (const auto& [node, queues] : owned) ask.push_back({node, view.nodes.at(node).host, view.nodes.at(node).port});
    // A node that does not answer: its queues' figures stay null, the owner still shows.
    std::vector<entity> out;
    for (auto& [node, entities] : query_nodes(ask, "wharf.queue", node_id_)) {
        for (auto& e : entities) {
            auto name = e.find("name");
            auto* q = name == e.end() ? nullptr : std::get_if<std::string>(&name->second);
            if (q != nullptr && owned[node].count(*q)) out.push_back(std::move(e)); // the owner's figures only
        }
    }
    return out;
}

result<entity, error> queue_admin::invoke(std::string_view op, std::string_view name, const entity& args) {
    const std::string queue(name);
    auto o = owner_of(queue);
    if (!o) return fail(error{errc::not_found, "no wharf.queue named '" + queue + "'"});
    if (op == "UPDATE") return update(queue, *o, args);
    if (op == "DELETE") return remove(queue, *o);
    if (op != "PURGE") return fail(error{errc::not_implemented, "operation '" + std::string(op) + "'"});
    if (o->rec.node == node_id_) return entity{{"name", queue}, {"node", node_id_}, {"purged", int64_t{0}}}; // unused
    if (o->host.empty())
        return fail(error{errc::not_allowed, "queue '" + queue + "' is on node " + o->rec.node +
                                                 ", which is down: its messages cannot be purged until it is back"});
    auto reply = ask_node(o->rec.node, o->host, o->port, request_props("PURGE", queue));
    if (!reply) return fail(reply.error());
    if (!reply->ok()) return fail(error_of(o->rec.node, *reply));
    entity e{{"name", queue}, {"node", o->rec.node}};
    if (const auto* n = reply->body.find("purged")) e["purged"] = attribute_of(*n);
    return e;
}

result<entity, error> queue_admin::update(const std::string& queue, const owner_at& o, const entity& args) {
    if (auto bad = plugins::unknown_setting(args)) return fail(*bad);
    auto wanted = plugins::settings_from_args(args, queue);
    if (!wanted) return fail(wanted.error());
    if (wanted->empty()) {
        std::string names;
        for (auto s : plugins::queue_setting_names) names += (names.empty() ? "" : ", ") + std::string(s);
        return fail(error{errc::invalid_field, "UPDATE of a wharf.queue changes one of: " + names});
    }
    const std::string key = std::string(settings_prefix) + queue;
    plugins::queue_settings merged;
    {
        std::lock_guard l(s_->mu);
        for (int attempt = 0;; ++attempt) {
            auto cur = s_->store->get(key);
            if (!cur) return fail(store_failed(cur.error()));
            merged = *cur ? decode_settings((*cur)->value) : plugins::queue_settings{};
            merged.merge(*wanted);
            auto put = s_->store->compare_and_set(key, *cur ? (*cur)->version : 0, encode(merged));
            if (put) {
                // A DELETE that ran meanwhile removed the owner record: take
                // the settings back, or a later CREATE would inherit them.
                auto still = s_->store->get(std::string(owners_prefix) + queue);
                if (still && !*still) {
                    (void)s_->store->compare_and_delete(key, *put);
                    return fail(error{errc::not_found, "no wharf.queue named '" + queue + "' (deleted meanwhile)"});
                }
                break;
            }
            if (put.error().code != store_errc::conflict || attempt == 4) return fail(store_failed(put.error()));
        }
    }
    // The owner's WLM worker applies the newest record, in store order (two
    // UPDATEs applied here directly could land in the wrong order). Here:
    // woken now; elsewhere: within that node's poll interval.
    if (o.rec.node == node_id_ && s_->wake) s_->wake();
    entity e{{"name", queue}, {"node", o.rec.node}};
    plugins::put_settings(e, merged);
    return e;
}

result<entity, error> queue_admin::remove(const std::string& queue, const owner_at& o) {
    if (o.rec.moving())
        return fail(error{errc::not_allowed, "queue '" + queue + "' is moving from " + o.rec.node + " to " +
                                                 o.rec.to + ": DELETE it when the move is done"});
    if (o.rec.node == node_id_) {
        ctx_.remove_queue(queue); // false: never attached here yet; the records still go
    } else {
        if (o.host.empty())
            return fail(error{errc::not_allowed, "queue '" + queue + "' is on node " + o.rec.node +
                                                     ", which is down: delete it when the node is back"});
        auto reply = ask_node(o.rec.node, o.host, o.port, request_props("DELETE", queue));
        if (!reply) return fail(reply.error());
        if (!reply->ok() && reply->status != 404) return fail(error_of(o.rec.node, *reply));
    }
    std::lock_guard l(s_->mu);
    auto del = s_->store->compare_and_delete(std::string(owners_prefix) + queue, o.rec.version);
    if (!del) return fail(store_failed(del.error()));
    if (!*del) {
        auto now = s_->store->get(std::string(owners_prefix) + queue);
        if (now && !*now) return fail(error{errc::not_found, "no wharf.queue named '" + queue + "' (deleted meanwhile)"});
        return fail(error{errc::not_allowed, "queue '" + queue + "' changed owner meanwhile; its messages at " +
                                                 o.rec.node + " are gone, try DELETE again"});
    }
    if (auto s = s_->store->get(std::string(settings_prefix) + queue); s && *s)
        (void)s_->store->compare_and_delete(std::string(settings_prefix) + queue, (*s)->version);
    return entity{{"name", queue}};
}

} // namespace wharf::wlm
