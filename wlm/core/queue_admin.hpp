#pragma once
// queue_admin: the WLM's part of wharf.queue that makes any node answer for
// every queue of the cluster (issue #6).
//   QUERY       the figures and settings of queues owned by other live
//               nodes, asked of those nodes (in parallel, each request
//               scoped to the node it goes to), merged with this node's own.
//   READ        the same, asked of the queue's owner alone.
//   UPDATE      settings (limits, overflow, dead-letter address): stored in
//               the metadata store (settings/<queue>), so they follow the
//               queue when it moves and outlive restarts; the owner's WLM
//               worker applies them (at once when it is this node, else
//               within its poll interval).
//   PURGE       at the owner (forwarded when it is another node).
//   DELETE      at the owner, then the owner and settings records; refused
//               while the queue is moving.
// Queues without an owner record (temporary ones, a single node's) are left
// to the broker's own wharf.queue.
//
// Threads: management's workers; calls block on the store and on other
// nodes (each up to peer_timeout, see peer_entities.hpp).

#include "client/management/mgmt_client.hpp"
#include "plugins/api/plugin.hpp"
#include "wlm/core/records.hpp"
#include "wlm/core/wlm_entities.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace wharf::wlm {

class queue_admin final : public plugins::entity_type {
  public:
    queue_admin(std::shared_ptr<shared_store> s, plugins::node_context& ctx, std::string node_id)
        : s_(std::move(s)), ctx_(ctx), node_id_(std::move(node_id)) {}
    std::string_view type_name() const override { return "wharf.queue"; }
    std::vector<std::string> attribute_names() const override { return {}; } // the broker's, for other nodes
    std::vector<std::string> operation_names() const override { return {"UPDATE", "PURGE", "DELETE"}; }
    bool asks_peers() const override { return true; }
    bool handles(std::string_view op, std::string_view name) override;
    result<std::vector<plugins::entity>, error> query() override;
    result<std::vector<plugins::entity>, error> read(std::string_view name) override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    struct owner_at {
        owner_record rec;
        std::string host;  // empty: the owner is not live
        uint16_t port = 0;
    };
    std::optional<owner_at> owner_of(const std::string& queue);
    bool held_here(std::string_view queue);
    result<plugins::entity, error> update(const std::string& queue, const owner_at& o, const plugins::entity& args);
    result<plugins::entity, error> remove(const std::string& queue, const owner_at& o);

    std::shared_ptr<shared_store> s_;
    plugins::node_context& ctx_;
    const std::string node_id_;
};

} // namespace wharf::wlm
