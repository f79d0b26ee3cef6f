#pragma once
// load_table: the latest load figures each node reported (queues owned,
// messages held, message rate, connections) and its membership state. Pure
// bookkeeping: it decides nothing (placement_policy does) and does no I/O.
//
// Owner: the WLM plugin, one table per node, fed from the metadata store.
// Threads: none of its own; not synchronised, use from one thread at a time.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::wlm {

struct node_load {
    enum class state { active, draining, down };

    std::string node_id;
    state st = state::active;
    std::vector<std::string> groups; // named groups this node belongs to (for group rules)
    uint64_t queues = 0;             // queues this node owns
    uint64_t messages = 0;           // messages it holds over all its queues
    double message_rate = 0.0;       // messages per second, in + out
    uint64_t connections = 0;
};

std::string_view to_string(node_load::state s);

// Why a node_load is not acceptable as load figures (empty id, a negative or
// non-finite rate), or empty when it is fine.
std::string invalid_load_reason(const node_load& n);

class load_table {
  public:
    // Replaces everything known about n.node_id (state, groups and figures).
    // Returns false, and changes nothing, if invalid_load_reason(n) is not empty.
    bool upsert(node_load n);

    // Forgets a node. Returns false if it was not known.
    bool remove(std::string_view node_id);

    // Sets a known node's state. Returns false if it is not known.
    bool set_state(std::string_view node_id, node_load::state st);

    // Adds delta to a known node's queue count (saturating at 0), so that
    // decisions taken before its next report see the queues just placed.
    // Returns false if the node is not known.
    bool adjust_queues(std::string_view node_id, int64_t delta);

    const node_load* find(std::string_view node_id) const;

    // Active nodes only, sorted by id: the placement candidates.
    std::vector<node_load> live_nodes() const;

    // Every known node whatever its state, sorted by id: what place() takes,
    // so that its reasons can name nodes that are draining or down.
    std::vector<node_load> snapshot() const;

    size_t size() const { return nodes_.size(); }

  private:
    std::map<std::string, node_load, std::less<>> nodes_;
};

} // namespace wharf::wlm
