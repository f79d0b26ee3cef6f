#include "wlm/placement/load_table.hpp"

#include <cmath>

namespace wharf::wlm {

std::string_view to_string(node_load::state s) {
    switch (s) {
    case node_load::state::active: return "active";
    case node_load::state::draining: return "draining";
    case node_load::state::down: return "down";
    }
    return "unknown";
}

std::string invalid_load_reason(const node_load& n) {
    if (n.node_id.empty())
        return "node id is empty";
    if (!std::isfinite(n.message_rate) || n.message_rate < 0)
        return "node " + n.node_id + " reports a message rate that is not a finite number >= 0";
    return {};
}

bool load_table::upsert(node_load n) {
    if (!invalid_load_reason(n).empty())
        return false;
    auto id = n.node_id;
    nodes_.insert_or_assign(std::move(id), std::move(n));
    return true;
}

bool load_table::remove(std::string_view node_id) {
    auto it = nodes_.find(node_id);
    if (it == nodes_.end())
        return false;
    nodes_.erase(it);
    return true;
}

bool load_table::set_state(std::string_view node_id, node_load::state st) {
    auto it = nodes_.find(node_id);
    if (it == nodes_.end())
        return false;
    it->second.st = st;
    return true;
}

bool load_table::adjust_queues(std::string_view node_id, int64_t delta) {
    auto it = nodes_.find(node_id);
    if (it == nodes_.end())
        return false;
    uint64_t& q = it->second.queues;
    if (delta >= 0) {
        q += static_cast<uint64_t>(delta);
    } else {
        // -(delta + 1) + 1 avoids overflow for INT64_MIN.
        uint64_t dec = static_cast<uint64_t>(-(delta + 1)) + 1;
        q = dec >= q ? 0 : q - dec;
    }
    return true;
}

const node_load* load_table::find(std::string_view node_id) const {
    auto it = nodes_.find(node_id);
    return it == nodes_.end() ? nullptr : &it->second;
}

std::vector<node_load> load_table::live_nodes() const {
    std::vector<node_load> out;
    for (const auto& [id, n] : nodes_)
        if (n.st == node_load::state::active)
            out.push_back(n);
    return out;
}

std::vector<node_load> load_table::snapshot() const {
    std::vector<node_load> out;
    out.reserve(nodes_.size());
    for (const auto& [id, n] : nodes_)
        out.push_back(n);
    return out;
}

} // namespace wharf::wlm
