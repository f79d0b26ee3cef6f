#pragma once
// Entity types of the network side, for management:
//   wharf.connection  the clients connected to this node (QUERY, READ;
//                     DELETE closes one with amqp:connection:forced)
//   wharf.link        their links (QUERY, READ)
// Threads: management's worker; each connection keeps a copy of what it
// shows, so nothing here waits for a connection's thread.

#include "broker/server/server.hpp"
#include "plugins/api/plugin.hpp"

namespace wharf::server {

class connection_entities final : public plugins::entity_type {
  public:
    connection_entities(server& s, std::string node_id) : server_(s), node_id_(std::move(node_id)) {}
    std::string_view type_name() const override { return "wharf.connection"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {"DELETE"}; }
    result<std::vector<plugins::entity>, error> query() override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name,
                                          const plugins::entity& args) override;

  private:
    server& server_;
    const std::string node_id_;
};

class link_entities final : public plugins::entity_type {
  public:
    link_entities(server& s, std::string node_id) : server_(s), node_id_(std::move(node_id)) {}
    std::string_view type_name() const override { return "wharf.link"; }
    std::vector<std::string> attribute_names() const override;
    std::vector<std::string> operation_names() const override { return {}; }
    result<std::vector<plugins::entity>, error> query() override;
    result<plugins::entity, error> invoke(std::string_view op, std::string_view, const plugins::entity&) override {
        return fail(error{errc::not_implemented, "operation '" + std::string(op) + "' on wharf.link"});
    }

  private:
    server& server_;
    const std::string node_id_;
};

} // namespace wharf::server
