#include "wlm/core/peer_entities.hpp"

#include "wlm/core/cluster_admin.hpp"

#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>

namespace wharf::wlm {

using plugins::attribute_value;
using plugins::entity;

attribute_value attribute_of(const mgmt::datum& d) {
    if (d.is_null()) return {};
    if (auto* b = std::get_if<bool>(&d.v)) return *b;
    if (auto i = d.as_int()) return *i;
    if (auto* s = d.as_string()) return *s;
    if (auto* x = std::get_if<double>(&d.v)) return *x;
    return mgmt::to_json(d);
}

error error_of(const std::string& node, const mgmt::mgmt_reply& r) {
    const errc code = r.status == 400   ? errc::invalid_field
                      : r.status == 403 ? errc::not_allowed
                      : r.status == 404 ? errc::not_found
                      : r.status == 501 ? errc::not_implemented
                                        : errc::internal_error;
    return {code, "node " + node + ": " + r.description};
}

result<mgmt::mgmt_reply, error> ask_node(const std::string& node, const std::string& host, uint16_t port,
                                         mgmt_props props, std::optional<proton::value> body) {
    props.emplace_back("wharf:scope", proton::scalar(std::string("node")));
    try {
        const auto start = std::chrono::steady_clock::now();
        mgmt::mgmt_client c(host + ":" + std::to_string(port), peer_timeout);
        const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        c.timeout(std::max(std::chrono::milliseconds(1), peer_timeout - spent));
        return c.call(mgmt::mgmt_request{std::move(props), std::move(body)});
    } catch (const std::exception& e) {
        return fail(error{errc::internal_error, "node " + node + " did not answer: " + e.what()});
    }
}

std::vector<entity> entities_of(const mgmt::mgmt_reply& r) {
    std::vector<entity> out;
    const mgmt::datum* names = r.body.find("attributeNames");
    const mgmt::datum* rows = r.body.find("results");
    if (names == nullptr || rows == nullptr || !names->as_list() || !rows->as_list()) return out;
    for (const auto& row : *rows->as_list()) {
        const auto* cells = row.as_list();
        if (cells == nullptr || cells->size() != names->as_list()->size()) continue;
        entity e;
        for (size_t i = 0; i < cells->size(); ++i)
            if (auto* n = (*names->as_list())[i].as_string()) e[*n] = attribute_of((*cells)[i]);
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<node_address> peer_entities::live_peers() {
    std::vector<node_address> out;
    std::lock_guard l(s_->mu);
    auto v = read_cluster(*s_->store);
    if (!v) return out;
    for (const auto& [id, n] : v->nodes)
        if (id != node_id_) out.push_back({id, n.host, n.port});
    return out;
}

std::optional<std::pair<node_address, std::string>> peer_entities::split(std::string_view name) {
    const size_t slash = name.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const std::string_view node = name.substr(0, slash);
    for (auto& p : live_peers())
        if (p.id == node) return std::pair{p, std::string(name.substr(slash + 1))};
    return std::nullopt;
}

bool peer_entities::handles(std::string_view, std::string_view name) { return split(name).has_value(); }

result<std::vector<entity>, error> peer_entities::query() { return query_of(live_peers()); }

result<std::vector<entity>, error> peer_entities::read(std::string_view name) {
    auto where = split(name);
    if (!where) return std::vector<entity>{}; // this node's: the broker's
    return query_of({where->first});
}

std::map<std::string, std::vector<entity>> query_nodes(const std::vector<node_address>& nodes,
                                                      const std::string& type, const std::string& asker) {
    std::map<std::string, std::future<result<mgmt::mgmt_reply, error>>> asked;
    for (const auto& p : nodes) {
        mgmt_props props = {{"operation", proton::scalar(std::string("QUERY"))},
                            {"type", proton::scalar(std::string("org.amqp.management"))},
                            {"name", proton::scalar(std::string("self"))},
                            {"entityType", proton::scalar(type)}};
        std::map<std::string, proton::value> body{{"attributeNames", std::vector<std::string>{}}};
        asked[p.id] = std::async(std::launch::async, [p, props, body] {
            return ask_node(p.id, p.host, p.port, props, proton::value(body));
        });
    }
    std::map<std::string, std::vector<entity>> out;
    for (auto& [node, f] : asked) {
        auto reply = f.get();
        if (reply && !reply->ok()) reply = fail(error_of(node, *reply));
        if (!reply) {
            spdlog::info("{}: management: no {} from {}: {}", asker, type, node, reply.error().description);
            continue;
        }
        out[node] = entities_of(*reply);
    }
    return out;
}

std::vector<entity> peer_entities::query_of(const std::vector<node_address>& peers) {
    std::vector<entity> out;
    for (auto& [node, entities] : query_nodes(peers, type_, node_id_)) {
        for (auto& e : entities) {
            // Names of other nodes' entities (and the connections links
            // name) carry the node: "n2/connection-4".
            for (const char* key : {"name", "connection"})
                if (auto it = e.find(key); it != e.end())
                    if (auto* s = std::get_if<std::string>(&it->second)) *s = node + "/" + *s;
            out.push_back(std::move(e));
        }
    }
    return out;
}

result<entity, error> peer_entities::invoke(std::string_view op, std::string_view name, const entity& args) {
    auto where = split(name);
    if (!where) return fail(error{errc::not_found, "no " + type_ + " named '" + std::string(name) + "'"});
    const auto& [p, rest] = *where;
    mgmt_props props = {{"operation", proton::scalar(std::string(op))},
                        {"type", proton::scalar(type_)},
                        {"name", proton::scalar(rest)}};
    std::map<std::string, proton::value> body;
    for (const auto& [k, v] : args) {
        if (auto* s = std::get_if<std::string>(&v)) body[k] = *s;
        else if (auto* i = std::get_if<int64_t>(&v)) body[k] = *i;
        else if (auto* b = std::get_if<bool>(&v)) body[k] = *b;
        else if (auto* x = std::get_if<double>(&v)) body[k] = *x;
    }
    for (const auto& [k, v] : props) body.erase(k);
    for (const char* k : {"wharf:scope", "identity", "entityType"}) body.erase(k);
    auto reply = ask_node(p.id, p.host, p.port, std::move(props), proton::value(body));
    if (!reply) return fail(reply.error());
    if (!reply->ok()) return fail(error_of(p.id, *reply));
    return entity{{"name", std::string(name)}};
}

} // namespace wharf::wlm
