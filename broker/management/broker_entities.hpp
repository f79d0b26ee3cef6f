#pragma once
// Entity types the broker itself offers to management.
//   wharf.queue   the queues this node holds, with their figures (READ, QUERY)
// Threads: management's worker; query() waits for the queue engine.

#include "broker/engine/queue_engine.hpp"
#include "plugins/api/plugin.hpp"

namespace wharf::management {

class queue_entities final : public plugins::entity_type {
  public:
    explicit queue_entities(engine::queue_engine& e) : engine_(e) {}
    std::string_view type_name() const override { return "wharf.queue"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {}; }
    result<std::vector<plugins::entity>, error> query() override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view, const plugins::entity&) override {
        return fail(error{errc::not_implemented, "operation '" + std::string(op) + "' on wharf.queue"});
    }

  private:
    engine::queue_engine& engine_;
};

} // namespace wharf::management
