#pragma once
// The WLM's records in the metadata store, as text values "k=v;k=v":
//   nodes/<id>     addr=HOST:PORT;state=active;queues=N;messages=N;connections=N;groups=a,b
//                  (tied to the node's membership lease: gone when it lapses)
//   owners/<queue> node=<id>;epoch=<n>;state=active|moving;to=<id>;reason=<why, to the end>
//                  (moving: the owner is handing the queue to node `to`; the
//                  epoch grows when the new owner takes over)
//   drain/<id>     present while an operator wants node <id> drained
//   routes/<glob>  node=<id>|group=<name>;mode=relay|redirect|  (management's
//                  routes: placement and serving mode of matching queues)
//   placement      [policy=<least-loaded|round-robin|consistent-hash|local>]
//                  [;weight-queues=W;weight-messages=W;weight-message-rate=W;
//                  weight-connections=W]  (management's placement settings;
//                  a part left out is each node's configured one. Only
//                  "policy=NAME" is written while no weights were set, which
//                  nodes built before weights existed read too; they ignore
//                  a record with weights and keep their configured policy.)
//   settings/<queue> max-depth=N;max-depth-bytes=N;max-delivery-count=N;
//                  overflow=block|reject;dead-letter=<name, to the end>
//                  (management's settings of a queue, each optional: the
//                  owner applies them, wherever the queue moves)
// Pure functions; any thread.

#include "plugins/api/queue_settings.hpp"
#include "wlm/metadata/metadata_store.hpp"
#include "wlm/placement/load_table.hpp"
#include "wlm/placement/placement_policy.hpp"
#include "wlm/placement/placement_rule.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wharf::wlm {

inline constexpr std::string_view nodes_prefix = "nodes/";
inline constexpr std::string_view owners_prefix = "owners/";
inline constexpr std::string_view drain_prefix = "drain/";
inline constexpr std::string_view routes_prefix = "routes/";
inline constexpr std::string_view placement_key = "placement";
inline constexpr std::string_view settings_prefix = "settings/";

struct node_record {
    std::string host;
    uint16_t port = 0;
    node_load load;   // node_id, state, groups, figures
    lease_id lease = 0; // the membership lease the record is tied to (the store's, not encoded)
};

struct owner_record {
    enum class state { active, moving };
    std::string node;
    uint64_t epoch = 0;
    state st = state::active;
    std::string to;      // moving: the next owner
    std::string reason;  // why this node: the placement decision (last field)
    uint64_t version = 0; // the store's version of the record (not encoded)

    bool moving() const { return st == state::moving; }
};

std::string encode(const node_record& n);
std::optional<node_record> decode_node(std::string_view id, std::string_view value);
// A route from management: where matching queues are placed (node or
// group), and how other nodes serve them ("" = the node's configured mode).
struct route_record {
    placement_rule rule;   // pattern and target
    std::string mode;      // "", "relay" or "redirect"
};
std::string encode(const route_record& r);
std::optional<route_record> decode_route(std::string_view pattern, std::string_view value);

std::string encode(const owner_record& o);
std::optional<owner_record> decode_owner(std::string_view value);

std::string encode(const plugins::queue_settings& s);
// Fields it cannot read are left unset.
plugins::queue_settings decode_settings(std::string_view value);

// Management's placement settings; each part unset: the node's config.
struct placement_record {
    std::optional<policy_kind> policy;
    std::optional<placement_weights> weights; // all four, or none
};
std::string encode(const placement_record& p);
// nullopt for a value that is not a placement record (an unknown policy, a
// weight that is not a number >= 0, only some of the weights).
std::optional<placement_record> decode_placement(std::string_view value);

} // namespace wharf::wlm
