#pragma once
// Asking other nodes' $management, and the entity types that need it.
//
// ask_node: one request to a node, scoped to that node (application
// property wharf:scope = "node": it answers from itself alone), over a
// short-lived management client; up to peer_timeout in all (connecting and
// the answer).
//
// peer_entities: the other live nodes' part of a per-node type
// (wharf.connection, wharf.link), so that any node lists the cluster's. Their
// entities are named "<node>/<name>" (this node's keep their plain names);
// DELETE of such a name goes to that node.
//
// Threads: management's workers; calls block on the store and on peers.

#include "client/management/mgmt_client.hpp"
#include "plugins/api/plugin.hpp"
#include "wlm/core/wlm_entities.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wharf::wlm {

inline constexpr std::chrono::milliseconds peer_timeout{2000};

using mgmt_props = std::vector<std::pair<std::string, proton::scalar>>;

result<mgmt::mgmt_reply, error> ask_node(const std::string& node, const std::string& host, uint16_t port,
                                         mgmt_props props, std::optional<proton::value> body = std::nullopt);

// The error a node's answer stands for, its description naming the node.
error error_of(const std::string& node, const mgmt::mgmt_reply& r);

// A management value as an attribute (nested values become JSON text).
plugins::attribute_value attribute_of(const mgmt::datum& d);

// The rows of a QUERY reply as entities.
std::vector<plugins::entity> entities_of(const mgmt::mgmt_reply& r);

struct node_address {
    std::string id, host;
    uint16_t port = 0;
};

// QUERY of `type` at each node, all at once: their entities, by node. A node
// that does not answer within peer_timeout is left out (and logged).
std::map<std::string, std::vector<plugins::entity>> query_nodes(const std::vector<node_address>& nodes,
                                                                const std::string& type, const std::string& asker);

class peer_entities final : public plugins::entity_type {
  public:
    peer_entities(std::shared_ptr<shared_store> s, std::string type, std::vector<std::string> operations,
                  std::string node_id)
        : s_(std::move(s)), type_(std::move(type)), ops_(std::move(operations)), node_id_(std::move(node_id)) {}
    std::string_view type_name() const override { return type_; }
    std::vector<std::string> attribute_names() const override { return {}; } // the broker's
    std::vector<std::string> operation_names() const override { return ops_; }
    bool asks_peers() const override { return true; }
    bool handles(std::string_view op, std::string_view name) override;
    result<std::vector<plugins::entity>, error> query() override;
    result<std::vector<plugins::entity>, error> read(std::string_view name) override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    std::vector<node_address> live_peers();
    // The entities of the type at these nodes, asked all at once (a node
    // that does not answer in time adds none).
    std::vector<plugins::entity> query_of(const std::vector<node_address>& peers);
    // "<node>/<rest>" of a live peer: that peer and rest.
    std::optional<std::pair<node_address, std::string>> split(std::string_view name);

    std::shared_ptr<shared_store> s_;
    const std::string type_;
    const std::vector<std::string> ops_;
    const std::string node_id_;
};

} // namespace wharf::wlm
