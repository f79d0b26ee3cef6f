#include "wlm/core/records.hpp"

#include <algorithm>
#include <charconv>
#include <map>

namespace wharf::wlm {

namespace {
std::map<std::string, std::string, std::less<>> fields(std::string_view v) {
    std::map<std::string, std::string, std::less<>> out;
    while (!v.empty()) {
        const size_t end = v.find(';');
        std::string_view part = v.substr(0, end);
        const size_t eq = part.find('=');
        if (eq != std::string_view::npos) out.emplace(part.substr(0, eq), part.substr(eq + 1));
        if (end == std::string_view::npos) break;
        v.remove_prefix(end + 1);
    }
    return out;
}
template <class T> bool number(const std::string& s, T& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}
} // namespace

std::string encode(const node_record& n) {
    std::string groups;
    for (const auto& g : n.load.groups) groups += (groups.empty() ? "" : ",") + g;
    return "addr=" + n.host + ":" + std::to_string(n.port) + ";state=" +
           std::string(to_string(n.load.st)) + ";queues=" + std::to_string(n.load.queues) +
           ";messages=" + std::to_string(n.load.messages) + ";connections=" +
           std::to_string(n.load.connections) + ";groups=" + groups;
}

std::optional<node_record> decode_node(std::string_view id, std::string_view value) {
    auto f = fields(value);
    node_record n;
    n.load.node_id = std::string(id);
    auto addr = f.find("addr");
    if (addr == f.end()) return std::nullopt;
    const size_t colon = addr->second.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    n.host = addr->second.substr(0, colon);
    if (!number(addr->second.substr(colon + 1), n.port)) return std::nullopt;
    const std::string st = f.count("state") ? f["state"] : "active";
    n.load.st = st == "draining" ? node_load::state::draining
                : st == "down"   ? node_load::state::down
                                 : node_load::state::active;
    if (f.count("queues")) number(f["queues"], n.load.queues);
    if (f.count("messages")) number(f["messages"], n.load.messages);
    if (f.count("connections")) number(f["connections"], n.load.connections);
    if (f.count("groups")) {
        std::string_view g = f["groups"];
        while (!g.empty()) {
            const size_t c = g.find(',');
            if (c != 0) n.load.groups.emplace_back(g.substr(0, c));
            if (c == std::string_view::npos) break;
            g.remove_prefix(c + 1);
        }
    }
    return n;
}

std::string encode(const route_record& r) {
    return std::string(r.rule.target == placement_rule::target_kind::node ? "node=" : "group=") +
           r.rule.target_name + ";mode=" + r.mode;
}

std::optional<route_record> decode_route(std::string_view pattern, std::string_view value) {
    auto f = fields(value);
    route_record r;
    r.rule.pattern = std::string(pattern);
    if (f.count("node")) {
        r.rule.target = placement_rule::target_kind::node;
        r.rule.target_name = f["node"];
    } else if (f.count("group")) {
        r.rule.target = placement_rule::target_kind::group;
        r.rule.target_name = f["group"];
    } else {
        return std::nullopt;
    }
    if (r.rule.target_name.empty()) return std::nullopt;
    r.mode = f.count("mode") ? f["mode"] : "";
    if (r.mode != "" && r.mode != "relay" && r.mode != "redirect") return std::nullopt;
    return r;
}

std::string encode(const owner_record& o) {
    std::string reason = o.reason;
    std::replace(reason.begin(), reason.end(), ';', ','); // keep it one field
    return "node=" + o.node + ";epoch=" + std::to_string(o.epoch) +
           (o.moving() ? ";state=moving;to=" + o.to : std::string(";state=active")) + ";reason=" + reason;
}

std::optional<owner_record> decode_owner(std::string_view value) {
    auto f = fields(value);
    owner_record o;
    if (!f.count("node") || !f.count("epoch") || !number(f["epoch"], o.epoch)) return std::nullopt;
    o.node = f["node"];
    if (f.count("state") && f["state"] == "moving") {
        if (!f.count("to") || f["to"].empty()) return std::nullopt;
        o.st = owner_record::state::moving;
        o.to = f["to"];
    }
    const size_t r = value.find(";reason=");
    if (r != std::string_view::npos) o.reason = std::string(value.substr(r + 8));
    return o;
}

std::string encode(const plugins::queue_settings& s) {
    std::string out;
    auto put = [&](std::string_view key, const std::string& v) {
        if (!out.empty()) out += ';';
        out.append(key).append("=").append(v);
    };
    if (s.max_depth) put("max-depth", std::to_string(*s.max_depth));
    if (s.max_depth_bytes) put("max-depth-bytes", std::to_string(*s.max_depth_bytes));
    if (s.max_delivery_count) put("max-delivery-count", std::to_string(*s.max_delivery_count));
    if (s.overflow) put("overflow", *s.overflow);
    if (s.dead_letter_address) put("dead-letter", *s.dead_letter_address); // last: a name may hold ';'
    return out;
}

plugins::queue_settings decode_settings(std::string_view value) {
    plugins::queue_settings s;
    if (const size_t dl = value.find("dead-letter="); dl != std::string_view::npos &&
                                                      (dl == 0 || value[dl - 1] == ';')) {
        s.dead_letter_address = std::string(value.substr(dl + 12));
        value = value.substr(0, dl);
    }
    auto f = fields(value);
    auto count = [&](const char* key, std::optional<uint64_t>& into) {
        uint64_t n = 0;
        if (auto it = f.find(key); it != f.end() && number(it->second, n)) into = n;
    };
    count("max-depth", s.max_depth);
    count("max-depth-bytes", s.max_depth_bytes);
    count("max-delivery-count", s.max_delivery_count);
    if (auto it = f.find("overflow"); it != f.end() && (it->second == "block" || it->second == "reject"))
        s.overflow = it->second;
    return s;
}

namespace {
struct weight_field {
    const char* key;
    double placement_weights::*member;
};
constexpr weight_field weight_fields[] = {{"weight-queues", &placement_weights::queues},
                                          {"weight-messages", &placement_weights::messages},
                                          {"weight-message-rate", &placement_weights::message_rate},
                                          {"weight-connections", &placement_weights::connections}};
} // namespace

std::string encode(const placement_record& p) {
    std::string out;
    if (p.policy) out = "policy=" + std::string(to_string(*p.policy));
    if (p.weights)
        for (const auto& f : weight_fields)
            out += (out.empty() ? "" : ";") + std::string(f.key) + "=" + format_score((*p.weights).*f.member);
    return out;
}

std::optional<placement_record> decode_placement(std::string_view value) {
    auto f = fields(value);
    placement_record p;
    if (f.count("policy")) {
        auto k = parse_policy_kind(f["policy"]);
        if (!k) return std::nullopt;
        p.policy = *k;
    }
    size_t weights = 0;
    placement_weights w;
    for (const auto& field : weight_fields) {
        auto it = f.find(field.key);
        if (it == f.end()) continue;
        auto v = parse_weight(it->second);
        if (!v) return std::nullopt;
        w.*field.member = *v;
        ++weights;
    }
    if (weights != 0 && weights != std::size(weight_fields)) return std::nullopt;
    if (weights != 0) p.weights = w;
    return p;
}

} // namespace wharf::wlm
