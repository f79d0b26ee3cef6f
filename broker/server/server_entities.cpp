#include "broker/server/server_entities.hpp"

#include <charconv>

namespace wharf::server {

namespace {
std::string name_of(const connection_info& c) { return "connection-" + std::to_string(c.id); }
} // namespace

std::vector<std::string> connection_entities::attribute_names() const {
    return {"name", "node", "container", "remote", "openedMs", "links"};
}

result<std::vector<plugins::entity>, error> connection_entities::query() {
    std::vector<plugins::entity> out;
    for (const auto& c : server_.connection_infos())
        out.push_back({{"name", name_of(c)},
                       {"node", node_id_},
                       {"container", c.container},
                       {"remote", c.remote},
                       {"openedMs", c.opened_ms},
                       {"links", static_cast<int64_t>(c.links.size())}});
    return out;
}

result<plugins::entity, error> connection_entities::invoke(std::string_view op, std::string_view name,
                                                           const plugins::entity& args) {
    if (op != "DELETE") return fail(error{errc::not_implemented, "operation '" + std::string(op) + "'"});
    std::string why = "closed by management";
    if (auto it = args.find("reason"); it != args.end())
        if (auto* s = std::get_if<std::string>(&it->second)) why += ": " + *s;
    const std::string prefix = "connection-";
    // The whole rest of the name is the number: "connection-1xyz" names no
    // connection, it is not connection 1.
    uint64_t id = 0;
    if (name.rfind(prefix, 0) == 0) {
        const std::string_view digits = name.substr(prefix.size());
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
        if (ec != std::errc{} || end != digits.data() + digits.size() || digits.starts_with('0')) id = 0;
    }
    if (id == 0 || !server_.close_connection(id, why))
        return fail(error{errc::not_found, "no wharf.connection named '" + std::string(name) + "'"});
    return plugins::entity{{"name", std::string(name)}};
}

std::vector<std::string> link_entities::attribute_names() const {
    return {"name", "node", "connection", "linkName", "address", "direction", "relayed"};
}

result<std::vector<plugins::entity>, error> link_entities::query() {
    std::vector<plugins::entity> out;
    for (const auto& c : server_.connection_infos()) {
        for (const auto& l : c.links) {
            // A link is its name and its role (AMQP 1.0 §2.6.1): a sender and
            // a receiver may share a name, so the entity's name has both.
            const std::string direction = l.client_sends ? "in" : "out";
            out.push_back({{"name", name_of(c) + "/" + direction + "/" + l.name},
                           {"node", node_id_},
                           {"connection", name_of(c)},
                           {"linkName", l.name},
                           {"address", l.address},
                           {"direction", direction},
                           {"relayed", l.relayed}});
        }
    }
    return out;
}

} // namespace wharf::server
