#pragma once
// wlm_service: the workload-management plugin on one node. Registers the
// node in the metadata store under a lease and renews it; keeps a cache of
// the cluster's nodes and queue owners, fed by the store's change log; and
// answers the broker's resolver chain: a queue owned here is local, a queue
// owned elsewhere is a redirect to its owner, and a queue nobody owns yet
// gets an owner by placement (policy and rules), written with
// compare-and-set so that concurrent first uses agree.
//
// Hand-overs (handover.cpp): each tick the node compares the queues it
// holds with the owner records. A queue it owns that is moving, or a queue
// it holds that someone else owns (it came back after its queues were
// reassigned), is handed to the owner-to-be: client links are redirected,
// the messages are transferred at least once, then the epoch flips (a move)
// or the local copy is deleted. The same tick drains the node when asked,
// gives the queues of nodes down longer than reassign-after new owners, and
// answers attaches parked while their queue was moving.
//
// Membership and fencing (membership.cpp): the node serves only while it is
// sure its lease is valid; when the store is unreachable for about a lease
// TTL it fences itself (detaches its queues' links, refuses attaches) and
// rejoins once the store answers again.
//
// Threads: resolve() runs on connection threads and only reads the cache
// (a mutex, not on the message path: attaches only); a cache miss and every
// store operation run on the service's own worker thread; the fence thread
// only watches the lease deadline.

#include "plugins/api/plugin.hpp"
#include "internode/forwarder.hpp"
#include "wlm/core/peer_entities.hpp"
#include "wlm/core/queue_admin.hpp"
#include "wlm/core/records.hpp"
#include "wlm/core/transfer.hpp"
#include "wlm/core/wlm_entities.hpp"
#include "wlm/metadata/metadata_store.hpp"
#include "wlm/placement/placement_policy.hpp"
#include "wlm/placement/placement_rule.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <thread>
#include <unordered_map>
#include <vector>

namespace wharf::wlm {

struct wlm_options {
    policy_kind policy = policy_kind::least_loaded;
    std::vector<placement_rule> rules;
    placement_weights weights; // weight-queues, weight-messages, weight-message-rate, weight-connections
    std::chrono::milliseconds lease_ttl{10000};
    std::chrono::milliseconds poll{200};
    std::vector<std::string> groups;
    // Down nodes' queues get new owners after this long; unset: they wait
    // for their node to return.
    std::optional<std::chrono::milliseconds> reassign_after;
    // An attach to a moving queue waits this long for the move to end.
    std::chrono::milliseconds park_timeout{30000};
    // How a node serves a queue owned elsewhere: relay the link to the owner
    // (default) or redirect the client there; mode_rules (first match) first.
    enum class serve_mode { relay, redirect };
    serve_mode mode = serve_mode::relay;
    std::vector<std::pair<std::string, serve_mode>> mode_rules; // glob -> mode
    serve_mode mode_for(std::string_view queue) const;
};

// The longest duration a [plugin.wlm] key may give: a year, in seconds.
inline constexpr int64_t max_duration_seconds = 365LL * 24 * 3600;

// Reads [plugin.wlm]; errors name the key ("plugin.wlm.placement: ...").
result<wlm_options, std::string> parse_wlm_options(const plugins::options& opts);

// What an attach is refused with when placing its queue failed in the
// store: amqp:invalid-field when the store refuses the name as a key, the
// store is unreachable (amqp:internal-error) when it cannot be reached or
// failed, and so on; the description names the node and the queue.
error placement_failure(const std::string& node, const std::string& queue, const store_error& e);

// A duration in seconds as people write it: "2", "0.5", "31536000".
std::string seconds_text(std::chrono::milliseconds d);

class wlm_service final : public plugins::plugin, public plugins::address_resolver {
  public:
    wlm_service(wlm_options opts, plugins::node_context& ctx);
    ~wlm_service() override;

    std::optional<std::string> start() override;
    void stop() override;
    void resolve(const plugins::attach_request& request, std::function<void(plugins::resolution)> done) override;
    std::optional<plugins::resolution> lookup(std::string_view address) override;

  private:
    using done_fn = std::function<void(plugins::resolution)>;
    using clock = std::chrono::steady_clock;

    struct request {
        std::string queue;
        done_fn done;
        std::string forwarded_from; // an inter-node link: check the store, not the cache
    };
    struct parked {
        std::string queue;
        clock::time_point deadline;
        done_fn done;
    };

    void run();
    std::optional<std::string> register_node();
    void heartbeat();
    void lose_lease(const std::string& why);
    void fence(const std::string& why);
    void rejoin();
    void watch_lease();
    void renew_lease();
    void lease_sure_until(clock::time_point t); // under mu_: moves it later, never earlier
    std::chrono::milliseconds fence_margin() const;
    bool load_all();
    void poll_changes();
    void apply(const change& c);
    void apply_placement(std::string_view value);
    // Reads or places the queue's owner; the store's error if it failed.
    std::optional<store_error> assign(const std::string& queue);
    // `unplaceable`: queues place_new found no node for (already logged).
    void serve(request& r, const std::unordered_set<std::string>& unplaceable);
    void answer_parked(bool all);
    plugins::resolution answer_locked(const std::string& queue) const;
    // The record's owner is another node that is not a live member.
    bool owner_down_locked(const owner_record& rec) const;
    // An attach to the queue waits for its move to end: it is moving and
    // its owner is live (a move whose owner is down cannot end).
    bool park_locked(const owner_record& rec) const;
    std::optional<plugins::resolution> node_local_answer(std::string_view address) const;
    std::vector<node_load> candidates_locked() const;
    void set_owner_locked(const std::string& queue, owner_record rec);
    void learn_nodes_locked(const std::vector<key_value>& live);
    // Returns the queues no node can take now.
    std::unordered_set<std::string> place_new(const std::deque<request>& work);
    result<size_t, store_error> place_and_write(const std::vector<std::string>& queues,
                                                std::unordered_set<std::string>* unplaceable = nullptr);
    void erase_owner_locked(const std::string& queue);
    // Management's CREATE: who should own a new queue (see owner_entities::placer).
    result<std::pair<std::string, std::string>, error> decide_owner(const std::string& queue, const std::string& node);
    bool draining_locked() const;
    // Management's routes (from the store) before the configured rules.
    std::vector<placement_rule> rules_locked() const;
    policy_kind policy_locked() const { return policy_override_.value_or(opts_.policy); }
    placement_weights weights_locked() const { return weights_override_.value_or(opts_.weights); }
    wlm_options::serve_mode mode_locked(std::string_view queue) const;

    // handover.cpp (worker thread)
    // Whether a tick must walk the queues: something it acts on changed
    // since the last walk, or a hand-over, a drain with queues it can move,
    // a reassignment or a failed step is under way, or the safety-net
    // period passed.
    bool reconcile_due(clock::time_point now);
    void reconcile();
    void hand_over(const plugins::local_queue& q, const owner_record& rec);
    void apply_settings(const std::string& queue);
    bool flip(const std::string& queue, const owner_record& rec);
    void abandon_move(const std::string& queue, const owner_record& rec, const std::string& why);
    void claim(const std::string& queue, uint64_t depth);
    void drain_some();
    void reassign_down();
    bool cas_owner(const std::string& queue, const owner_record& rec, const owner_record& next);
    std::shared_ptr<internode::forwarder> forwarder_to(const std::string& node);

    wlm_options opts_;
    plugins::node_context& ctx_;
    const plugins::node_info node_;
    std::unique_ptr<metadata_store> store_;   // worker thread (and start/stop)
    std::unique_ptr<metadata_store> renew_store_; // renew thread: keep-alives only
    std::shared_ptr<shared_store> admin_;     // management's own connection to the store
    std::unique_ptr<node_entities> node_entities_;
    std::unique_ptr<owner_entities> owner_entities_;
    std::unique_ptr<owner_entities> queue_owner_entities_; // the same, inside wharf.queue
    std::unique_ptr<route_entities> route_entities_;
    std::unique_ptr<placement_entities> placement_entities_;
    std::unique_ptr<queue_admin> queue_admin_;
    std::unique_ptr<peer_entities> peer_connections_, peer_links_; // other nodes' wharf.connection, wharf.link
    lease_id lease_ = 0;
    uint64_t node_version_ = 0;
    uint64_t revision_ = 0;
    placement_state placement_;
    clock::time_point next_heartbeat_;
    clock::time_point next_reconcile_;
    // Worker thread only.
    std::map<std::string, std::unique_ptr<transfer>> transfers_;       // by queue
    std::map<std::string, std::shared_ptr<internode::forwarder>> forwarders_; // by node
    std::map<std::string, clock::time_point> down_since_;              // by node
    std::map<std::string, std::string> applied_settings_;              // by queue: the record applied
    // What the last walk saw: the engine's queue_set_version and
    // world_version_ (none before the first walk); again_: a step failed
    // or waits, so walk again on the next tick.
    std::optional<std::pair<uint64_t, uint64_t>> reconciled_;
    bool again_ = false;
    clock::time_point next_full_reconcile_;
    // Draining: the queues placement found no other node for (each logged
    // once per drain, and again when placement_inputs_version_ moves), and
    // whether the drain has work a walk can do (moves under
    // way or queues that can go): unmovable queues alone do not make every
    // tick walk.
    std::set<std::string> drain_stuck_;
    uint64_t drain_stuck_inputs_ = 0;
    bool drain_pending_ = false;

    mutable std::mutex mu_;                   // the caches and the request queues
    std::condition_variable cv_;
    // Owner records by queue, and how many each node holds (cluster_admin.hpp
    // holder()): kept in step by set_owner_locked/erase_owner_locked, so that
    // a placement does not count every queue of the cluster again.
    std::unordered_map<std::string, owner_record> owners_;
    std::unordered_map<std::string, uint64_t> owned_;
    // Moves on whenever something reconcile() acts on changes: an owner
    // record, a node joining or leaving (or moving), drains, routes,
    // placement or settings records. Not on load reports.
    uint64_t world_version_ = 0;
    // Moves on when what placement decides with changes: nodes joining or
    // leaving, drains, routes, the placement record (not owner records).
    uint64_t placement_inputs_version_ = 0;
    std::map<std::string, node_record> nodes_;
    std::set<std::string> drains_;
    std::map<std::string, route_record> routes_;   // by pattern
    std::optional<policy_kind> policy_override_;   // the store's placement policy
    std::map<std::string, std::string> settings_;  // by queue: management's settings record
    std::optional<placement_weights> weights_override_; // and weights
    std::deque<request> requests_;
    std::vector<parked> parked_;
    bool stop_ = false;
    bool woken_ = false;                      // shared_store::wake was called
    std::atomic<bool> serving_{false};
    clock::time_point lease_sure_until_;   // the lease surely lives until then (membership.cpp)
    std::condition_variable fence_cv_;
    std::thread thread_;
    std::thread fence_thread_;             // watch_lease()
    lease_id renew_id_ = 0;                // under mu_: the lease the renew thread keeps alive
    std::condition_variable renew_cv_;
    std::thread renew_thread_;             // renew_lease()
};

} // namespace wharf::wlm
