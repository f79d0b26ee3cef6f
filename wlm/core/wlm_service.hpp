#pragma once
// wlm_service: the workload-management plugin on one node. Registers the
// node in the metadata store under a lease and renews it; keeps a cache of
// the cluster's nodes and queue owners, fed by the store's change log; and
// answers the broker's resolver chain: a queue owned here is local, a queue
// owned elsewhere is a redirect to its owner, and a queue nobody owns yet
// gets an owner by placement (policy and rules), written with
// compare-and-set so that concurrent first uses agree.
//
// Threads: resolve() runs on connection threads and only reads the cache
// (a mutex, not on the message path: attaches only); a cache miss and every
// store operation run on the service's own worker thread.

#include "plugins/api/plugin.hpp"
#include "wlm/core/records.hpp"
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
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace wharf::wlm {

struct wlm_options {
    policy_kind policy = policy_kind::least_loaded;
    std::vector<placement_rule> rules;
    placement_weights weights;
    std::chrono::milliseconds lease_ttl{10000};
    std::chrono::milliseconds poll{200};
    std::vector<std::string> groups;
};

// Reads [plugin.wlm]; errors name the key ("plugin.wlm.placement: ...").
result<wlm_options, std::string> parse_wlm_options(const plugins::options& opts);

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

    void run();
    std::optional<std::string> register_node();
    void heartbeat();
    void lose_lease(const std::string& why);
    bool load_all();
    void poll_changes();
    void apply(const change& c);
    void assign(const std::string& queue);
    plugins::resolution answer_locked(const std::string& queue) const;
    std::vector<node_load> candidates_locked() const;

    wlm_options opts_;
    plugins::node_context& ctx_;
    const plugins::node_info node_;
    std::unique_ptr<metadata_store> store_;   // worker thread (and start/stop)
    lease_id lease_ = 0;
    uint64_t node_version_ = 0;
    uint64_t revision_ = 0;
    placement_state placement_;
    std::chrono::steady_clock::time_point next_heartbeat_;

    mutable std::mutex mu_;                   // the caches and the request queue
    std::condition_variable cv_;
    std::unordered_map<std::string, owner_record> owners_;
    std::map<std::string, node_record> nodes_;
    std::deque<std::pair<std::string, done_fn>> requests_;
    bool stop_ = false;
    std::atomic<bool> serving_{false};
    std::thread thread_;
};

} // namespace wharf::wlm
