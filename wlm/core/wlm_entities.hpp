#pragma once
// The WLM's management entity types, served by AMQP management (issue #6):
//   wharf.node   the cluster's live members (and nodes asked to
//                        drain): address, state, load, lease expiry, load
//                        score; DRAIN, UNDRAIN
//   wharf.owner  every queue's owner: node, epoch, state, next
//                        owner while moving, the reason; MOVE (arg "node")
//   wharf.route      management's routes: pattern -> node or group, and the
//                    serving mode (relay, redirect) of matching queues;
//                    CREATE, UPDATE, DELETE (every node follows within a
//                    poll interval)
//   wharf.placement  the cluster's placement policy and weights; UPDATE,
//                    REBALANCE (moves that even out queue counts)
// Node and owner read and write the metadata store through cluster_admin,
// so they say exactly what wharf-wlm says.
//
// Threads: any one thread at a time per object; each call takes the store's
// lock (the store is blocking and not shared with the WLM worker).

#include "plugins/api/plugin.hpp"
#include "wlm/metadata/metadata_store.hpp"
#include "wlm/placement/placement_policy.hpp"
#include "wlm/placement/placement_rule.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace wharf::wlm {

// The store both types use, with its lock.
struct shared_store {
    std::mutex mu;
    std::unique_ptr<metadata_store> store;
    // Asks the WLM worker to read the store's changes and act on them now,
    // not at its next poll (after management wrote something this node
    // must apply). Any thread; set once before management starts.
    std::function<void()> wake;
};

// This node's [plugin.wlm] placement settings. The store's "placement"
// record (management's UPDATE) overrides the policy and the weights.
struct placement_config {
    policy_kind policy = policy_kind::least_loaded;
    placement_weights weights;
    std::vector<placement_rule> rules;
};

class node_entities final : public plugins::entity_type {
  public:
    explicit node_entities(std::shared_ptr<shared_store> s, placement_config config = {})
        : s_(std::move(s)), config_(std::move(config)) {}
    std::string_view type_name() const override { return "wharf.node"; }
    std::vector<std::string> attribute_names() const override;
    // UPDATE {state: "draining" | "active"} is DRAIN / UNDRAIN.
    std::vector<std::string> operation_names() const override { return {"DRAIN", "UNDRAIN", "UPDATE"}; }
    result<std::vector<plugins::entity>, error> query() override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    std::shared_ptr<shared_store> s_;
    placement_config config_; // for the weights of loadScore
};

// Also offered as part of wharf.queue: management merges it with the
// broker's queue figures, so a queue shows its owner, epoch and reason.
class owner_entities final : public plugins::entity_type {
  public:
    // Decides an owner for a new queue: the given node (checked), or
    // placement's choice; (node, reason) or why not.
    using placer = std::function<result<std::pair<std::string, std::string>, error>(const std::string& queue,
                                                                                      const std::string& node)>;
    explicit owner_entities(std::shared_ptr<shared_store> s, std::string name = "wharf.owner", placer place = {})
        : s_(std::move(s)), name_(std::move(name)), place_(std::move(place)) {}
    std::string_view type_name() const override { return name_; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override {
        if (place_) return {"MOVE", "CREATE"};
        return {"MOVE"};
    }
    result<std::vector<plugins::entity>, error> query() override;
    // MOVE {node}; CREATE [{node}]: the queue gets its owner now (on that
    // node, or where placement puts it).
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    result<plugins::entity, error> create(const std::string& queue, const plugins::entity& args);

    std::shared_ptr<shared_store> s_;
    std::string name_;
    placer place_;
};

class route_entities final : public plugins::entity_type {
  public:
    explicit route_entities(std::shared_ptr<shared_store> s) : s_(std::move(s)) {}
    std::string_view type_name() const override { return "wharf.route"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {"CREATE", "UPDATE", "DELETE"}; }
    result<std::vector<plugins::entity>, error> query() override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    std::shared_ptr<shared_store> s_;
};

class placement_entities final : public plugins::entity_type {
  public:
    placement_entities(std::shared_ptr<shared_store> s, placement_config configured)
        : s_(std::move(s)), configured_(std::move(configured)) {}
    std::string_view type_name() const override { return "wharf.placement"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {"UPDATE", "REBALANCE"}; }
    result<std::vector<plugins::entity>, error> query() override;
    // UPDATE {policy, weightQueues, weightMessages, weightMessageRate,
    // weightConnections}: any of them. REBALANCE [{max, dryRun}].
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    result<plugins::entity, error> update(const plugins::entity& args);
    result<plugins::entity, error> rebalance(const plugins::entity& args);

    std::shared_ptr<shared_store> s_;
    placement_config configured_; // this node's config file's
};

} // namespace wharf::wlm
