#pragma once
// Entity types the broker itself offers to management.
//   wharf.queue   the queues this node holds, with their figures and
//                 settings (READ, QUERY, CREATE, UPDATE, PURGE, DELETE)
// Threads: management's worker; query() waits for the queue engine.

#include "broker/engine/queue_engine.hpp"
#include "plugins/api/plugin.hpp"
#include "plugins/api/queue_settings.hpp"

namespace wharf::management {

// Management's settings on top of a queue's policy.
void apply_settings(const plugins::queue_settings& s, config::queue_policy& p);

class queue_entities final : public plugins::entity_type {
  public:
    explicit queue_entities(engine::queue_engine& e) : engine_(e) {}
    std::string_view type_name() const override { return "wharf.queue"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {"CREATE", "UPDATE", "PURGE", "DELETE"}; }
    result<std::vector<plugins::entity>, error> query() override;
    // CREATE: an empty queue (settings among the arguments apply); UPDATE:
    // changes settings; PURGE: drops the messages waiting in the queue
    // (those out for delivery stay); DELETE: removes the queue, its
    // messages and its links.
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    engine::queue_engine& engine_;
};

} // namespace wharf::management
