#include "wlm/core/wlm_service.hpp"

#include "wlm/core/cluster_admin.hpp"
#include "wlm/metadata/open_metadata_store.hpp"

#include <spdlog/spdlog.h>

#include <unordered_set>
#include <utility>

#include <algorithm>
#include <charconv>

namespace wharf::wlm {

namespace {
std::string owner_key(std::string_view q) { return std::string(owners_prefix) + std::string(q); }
} // namespace

wlm_service::wlm_service(wlm_options opts, plugins::node_context& ctx)
    : opts_(std::move(opts)), ctx_(ctx), node_(ctx.node()) {}

wlm_service::~wlm_service() { stop(); }

std::optional<std::string> wlm_service::start() {
    if (node_.metadata.empty())
        return "metadata: not set; start with --metadata " + std::string(metadata_spec_forms);
    auto s = open_metadata_store(node_.metadata);
    if (!s) return s.error().description;
    store_ = std::move(s.value());
    auto admin = open_metadata_store(node_.metadata);
    if (!admin) return admin.error().description;
    auto renew = open_metadata_store(node_.metadata);
    if (!renew) return renew.error().description;
    renew_store_ = std::move(renew.value());
    admin_ = std::make_shared<shared_store>();
    admin_->store = std::move(admin.value());
    admin_->wake = [this] {
        {
            std::lock_guard l(mu_);
            woken_ = true;
        }
        cv_.notify_one();
    };
    const placement_config configured{opts_.policy, opts_.weights, opts_.rules};
    node_entities_ = std::make_unique<node_entities>(admin_, configured);
    owner_entities_ = std::make_unique<owner_entities>(admin_);
    queue_owner_entities_ = std::make_unique<owner_entities>(
        admin_, "wharf.queue", [this](const std::string& q, const std::string& n) { return decide_owner(q, n); });
    route_entities_ = std::make_unique<route_entities>(admin_);
    queue_admin_ = std::make_unique<queue_admin>(admin_, ctx_, node_.node_id);
    peer_connections_ = std::make_unique<peer_entities>(admin_, "wharf.connection", std::vector<std::string>{"DELETE"},
                                                        node_.node_id);
    peer_links_ = std::make_unique<peer_entities>(admin_, "wharf.link", std::vector<std::string>{}, node_.node_id);
    placement_entities_ = std::make_unique<placement_entities>(admin_, configured);
    if (auto bad = register_node()) return bad;
    if (!load_all()) return "cannot read the cluster's state from " + node_.metadata;
    serving_ = true;
    next_heartbeat_ = std::chrono::steady_clock::now() + opts_.lease_ttl / 3;
    ctx_.add_resolver(*this);
    ctx_.add_entity_type(*node_entities_);
    ctx_.add_entity_type(*owner_entities_);
    ctx_.add_entity_type(*queue_owner_entities_);
    ctx_.add_entity_type(*queue_admin_); // after the owners: figures from peers fill in, never override
    ctx_.add_entity_type(*peer_connections_);
    ctx_.add_entity_type(*peer_links_);
    ctx_.add_entity_type(*route_entities_);
    ctx_.add_entity_type(*placement_entities_);
    thread_ = std::thread([this] { run(); });
    fence_thread_ = std::thread([this] { watch_lease(); });
    renew_thread_ = std::thread([this] { renew_lease(); });
    spdlog::info("{}: wlm: member of the cluster in {} ({} nodes known, {} queues owned)",
                 node_.node_id, node_.metadata, nodes_.size(), owners_.size());
    return std::nullopt;
}

void wlm_service::stop() {
    {
        std::lock_guard l(mu_);
        if (stop_) return;
        stop_ = true;
    }
    cv_.notify_all();
    fence_cv_.notify_all();
    renew_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (fence_thread_.joinable()) fence_thread_.join();
    if (renew_thread_.joinable()) renew_thread_.join();
    transfers_.clear();   // what is unsettled goes back to the local queues
    forwarders_.clear();
    if (store_ && lease_ != 0) store_->revoke_lease(lease_); // leave the cluster now, not at lease expiry
    std::deque<request> left;
    std::vector<parked> waiting;
    {
        std::lock_guard l(mu_);
        left.swap(requests_);
        waiting.swap(parked_);
    }
    const auto stopping = plugins::resolution::refuse(errc::detach_forced, "node " + node_.node_id + " is stopping");
    for (auto& r : left) r.done(stopping);
    for (auto& p : waiting) p.done(stopping);
}

// ---- resolving -------------------------------------------------------------------

bool wlm_service::draining_locked() const { return drains_.count(node_.node_id) != 0; }

std::vector<placement_rule> wlm_service::rules_locked() const {
    std::vector<placement_rule> out;
    out.reserve(routes_.size() + opts_.rules.size());
    for (const auto& [pattern, r] : routes_) out.push_back(r.rule);
    out.insert(out.end(), opts_.rules.begin(), opts_.rules.end());
    return out;
}

wlm_options::serve_mode wlm_service::mode_locked(std::string_view queue) const {
    for (const auto& [pattern, r] : routes_) {
        if (r.mode.empty() || !glob_match(pattern, queue)) continue;
        return r.mode == "redirect" ? wlm_options::serve_mode::redirect : wlm_options::serve_mode::relay;
    }
    return opts_.mode_for(queue);
}

std::vector<node_load> wlm_service::candidates_locked() const {
    return loads_from_tally(nodes_, owned_, drains_);
}

void wlm_service::set_owner_locked(const std::string& queue, owner_record rec) {
    erase_owner_locked(queue);
    ++world_version_;
    ++owned_[holder(rec)];
    owners_[queue] = std::move(rec);
}

void wlm_service::erase_owner_locked(const std::string& queue) {
    auto it = owners_.find(queue);
    if (it == owners_.end()) return;
    if (auto t = owned_.find(holder(it->second)); t != owned_.end() && --t->second == 0) owned_.erase(t);
    owners_.erase(it);
    ++world_version_;
}

bool wlm_service::owner_down_locked(const owner_record& rec) const {
    return rec.node != node_.node_id && !nodes_.count(rec.node);
}

bool wlm_service::park_locked(const owner_record& rec) const { return rec.moving() && !owner_down_locked(rec); }

plugins::resolution wlm_service::answer_locked(const std::string& queue) const {
    auto o = owners_.find(queue);
    if (o == owners_.end())
        return plugins::resolution::refuse(errc::internal_error, "queue '" + queue + "' has no owner");
    // A move cannot end while its owner is down: say so rather than wait.
    if (owner_down_locked(o->second))
        return plugins::resolution::refuse(
            errc::detach_forced,
            "queue '" + queue + "' is owned by node " + o->second.node + ", which is down" +
                (o->second.moving() ? " (it was moving it to node " + o->second.to + ")" : "") +
                "; it is unavailable until that node returns" +
                (opts_.reassign_after ? " or the cluster reassigns it" : ""));
    if (o->second.moving())
        return plugins::resolution::refuse(errc::not_found, "queue '" + queue + "' is moving from node " +
                                                                o->second.node + " to node " + o->second.to +
                                                                "; send it again in a moment");
    if (o->second.node == node_.node_id) return plugins::resolution::local();
    auto n = nodes_.find(o->second.node);
    if (mode_locked(queue) == wlm_options::serve_mode::relay)
        return plugins::resolution::relay(o->second.node, n->second.host, n->second.port, queue);
    return plugins::resolution::redirect(o->second.node, n->second.host, n->second.port, queue);
}

// Temporary queues live on the node their creator is connected to; their
// names say which ("$dynamic.<node>.<n>"), so a reply sent from any node
// reaches them. Other '$' addresses are each node's own.
std::optional<plugins::resolution> wlm_service::node_local_answer(std::string_view address) const {
    if (address.empty() || address[0] != '$') return std::nullopt;
    constexpr std::string_view dyn = "$dynamic.";
    if (address.rfind(dyn, 0) != 0) return plugins::resolution::pass();
    // The node id may hold dots (the default is "wharf-" + the host name);
    // the counter after it does not.
    const std::string_view rest = address.substr(dyn.size());
    const std::string node(rest.substr(0, rest.rfind('.')));
    if (node == node_.node_id) return plugins::resolution::pass();
    std::lock_guard l(mu_);
    auto n = nodes_.find(node);
    if (n == nodes_.end())
        return plugins::resolution::refuse(errc::not_found, "temporary queue '" + std::string(address) +
                                                                "' belongs to node " + node + ", which is down");
    const std::string queue(address);
    if (mode_locked(queue) == wlm_options::serve_mode::relay)
        return plugins::resolution::relay(node, n->second.host, n->second.port, queue);
    return plugins::resolution::redirect(node, n->second.host, n->second.port, queue);
}

void wlm_service::resolve(const plugins::attach_request& request, done_fn done) {
    const std::string_view address = request.address;
    if (auto r = node_local_answer(address)) return done(std::move(*r));
    if (!serving_)
        return done(plugins::resolution::refuse(
            errc::detach_forced, "node " + node_.node_id +
                                     " has lost its cluster membership; its queues are unavailable "
                                     "until it rejoins"));
    const std::string queue(address);
    std::optional<plugins::resolution> known;
    {
        std::lock_guard l(mu_);
        auto o = owners_.find(queue);
        if (!request.forwarded_from.empty()) {
            // Another node hands messages over: take them if this node owns
            // the queue or is taking it over; else check the store itself.
            if (o != owners_.end() && (o->second.moving() ? o->second.to : o->second.node) == node_.node_id)
                known = plugins::resolution::local();
            else requests_.push_back({queue, std::move(done), std::string(request.forwarded_from)});
        } else if (o != owners_.end() && park_locked(o->second)) {
            // Wait for the move to end, then answer as the new owner says.
            parked_.push_back({queue, clock::now() + opts_.park_timeout, std::move(done)});
            return;
        } else if (o != owners_.end()) {
            known = answer_locked(queue);
        } else {
            requests_.push_back({queue, std::move(done), {}});
        }
    }
    if (known) {
        done(std::move(*known)); // outside the lock: done() may do anything
        return;
    }
    cv_.notify_one();
}

std::optional<plugins::resolution> wlm_service::lookup(std::string_view address) {
    if (auto r = node_local_answer(address)) return r;
    if (!serving_)
        return plugins::resolution::refuse(errc::detach_forced,
                                           "node " + node_.node_id + " has lost its cluster membership");
    const std::string queue(address);
    {
        std::lock_guard l(mu_);
        if (owners_.count(queue)) return answer_locked(queue);
        requests_.push_back({queue, [](plugins::resolution) {}, {}}); // place it now, for the next try
    }
    cv_.notify_one();
    return std::nullopt;
}

// A first use: read the owner, or place the queue and write its owner (a
// concurrent first use elsewhere may win: then read it).
std::optional<store_error> wlm_service::assign(const std::string& queue) {
    const std::string key = owner_key(queue);
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto cur = store_->get(key);
        if (!cur) return cur.error();
        if (*cur) {
            if (auto o = decode_owner((*cur)->value)) {
                o->version = (*cur)->version;
                std::lock_guard l(mu_);
                set_owner_locked(queue, std::move(*o));
            }
            return std::nullopt;
        }
        auto taken = place_and_write({queue});
        if (!taken) return taken.error();
        if (*taken == 0) return std::nullopt; // placed, or no node can take it (logged)
    }
    return std::nullopt;
}

void wlm_service::learn_nodes_locked(const std::vector<key_value>& live) {
    for (const auto& kv : live) {
        const std::string id = kv.key.substr(nodes_prefix.size());
        if (!nodes_.count(id))
            if (auto n = decode_node(id, kv.value)) {
                nodes_[id] = std::move(*n);
                ++world_version_;
                ++placement_inputs_version_;
            }
    }
}

// Places `queues` (each decision counting the ones before it, as the cache
// would) and writes their owner records with one create_many: one SQLite
// transaction, so a burst of thousands of new queues is not bound by one
// sync per queue. Returns how many another node had placed meanwhile (left
// to be read).
result<size_t, store_error> wlm_service::place_and_write(const std::vector<std::string>& queues,
                                                         std::unordered_set<std::string>* unplaceable) {
    // The change feed may lag the store (etcd's watch delivers a little
    // later): place among the members as the store has them now.
    auto live = store_->list(nodes_prefix);
    if (!live) return fail(live.error());
    std::vector<metadata_store::new_key> writes;
    std::vector<std::pair<std::string, owner_record>> recs;
    {
        std::lock_guard l(mu_);
        learn_nodes_locked(*live);
        auto loads = candidates_locked();
        const auto rules = rules_locked();
        for (const auto& queue : queues) {
            auto d = place(queue, node_.node_id, loads, rules, policy_locked(), weights_locked(), placement_);
            if (!d) {
                spdlog::warn("{}: wlm: cannot place queue '{}': {}", node_.node_id, queue, d.error());
                if (unplaceable != nullptr) unplaceable->insert(queue);
                continue;
            }
            for (auto& n : loads)
                if (n.node_id == d->node) ++n.queues;
            owner_record rec;
            rec.node = d->node;
            rec.epoch = 1;
            rec.reason = d->reason;
            writes.emplace_back(owner_key(queue), encode(rec));
            recs.emplace_back(queue, std::move(rec));
        }
    }
    if (writes.empty()) return size_t{0};
    auto put = store_->create_many(writes);
    if (!put) return fail(put.error());
    size_t taken = 0;
    std::lock_guard l(mu_);
    for (size_t i = 0; i < recs.size(); ++i) {
        if (!(*put)[i]) {
            ++taken;
            continue;
        }
        auto& [queue, rec] = recs[i];
        rec.version = *(*put)[i];
        spdlog::info("{}: wlm: queue '{}' -> {} ({})", node_.node_id, queue, rec.node, rec.reason);
        set_owner_locked(queue, std::move(rec));
    }
    return taken;
}

// First uses in one go: every queue of the batch that the cache does not
// know. What this leaves unknown (the store had it, or failed) serve() does
// one by one: assign() reads it, or says why not. A queue no node can take
// is refused without another try (and another line in the log).
std::unordered_set<std::string> wlm_service::place_new(const std::deque<request>& work) {
    std::vector<std::string> fresh;
    {
        std::lock_guard l(mu_);
        std::unordered_set<std::string> seen;
        for (const auto& r : work)
            if (r.forwarded_from.empty() && !owners_.count(r.queue) && seen.insert(r.queue).second)
                fresh.push_back(r.queue);
    }
    std::unordered_set<std::string> unplaceable;
    if (!fresh.empty()) (void)place_and_write(fresh, &unplaceable);
    return unplaceable;
}

// One attach (or anonymous-relay first use) the cache could not answer.
void wlm_service::serve(request& r, const std::unordered_set<std::string>& unplaceable) {
    bool known;
    {
        std::lock_guard g(mu_);
        known = owners_.count(r.queue) != 0;
    }
    // An inter-node link always reads the store: the cache may lag a move.
    std::optional<store_error> failed;
    if ((!known && !unplaceable.count(r.queue)) || !r.forwarded_from.empty()) failed = assign(r.queue);
    plugins::resolution res;
    {
        std::lock_guard g(mu_);
        auto o = owners_.find(r.queue);
        if (!r.forwarded_from.empty()) {
            const bool mine = o != owners_.end() &&
                              (o->second.moving() ? o->second.to : o->second.node) == node_.node_id;
            res = mine ? plugins::resolution::local()
                       : plugins::resolution::refuse(
                             errc::detach_forced,
                             "node " + node_.node_id + " does not own queue '" + r.queue + "' (owner: " +
                                 (o == owners_.end() ? std::string("none") : o->second.node) +
                                 "); it takes no messages handed over for it");
        } else if (o != owners_.end() && park_locked(o->second)) {
            parked_.push_back({r.queue, clock::now() + opts_.park_timeout, std::move(r.done)});
            return;
        } else if (o == owners_.end() && failed) {
            // Placing needs the store: refuse rather than guess (another node
            // may be placing the same queue).
            const error e = placement_failure(node_.node_id, r.queue, *failed);
            res = plugins::resolution::refuse(e.code, e.description);
        } else {
            res = o != owners_.end() ? answer_locked(r.queue)
                                     : plugins::resolution::refuse(errc::detach_forced,
                                                                   "no node can take queue '" + r.queue +
                                                                       "' now (see the node's log)");
        }
    }
    r.done(std::move(res));
}

error placement_failure(const std::string& node, const std::string& queue, const store_error& e) {
    const std::string cannot = "node " + node + " cannot place queue '" + queue + "': ";
    switch (e.code) {
    case store_errc::invalid:
        return error{errc::invalid_field, cannot + "the metadata store refuses the queue's name as a key (" +
                                              e.description + "); use another address"};
    case store_errc::unavailable:
    case store_errc::io:
        return error{errc::internal_error, cannot + "the metadata store is unreachable (" + e.description +
                                               "); attach again when it is back"};
    case store_errc::conflict:
        return error{errc::internal_error,
                     cannot + "its owner record kept changing (" + e.description + "); attach again"};
    case store_errc::lease_expired:
        return error{errc::internal_error, cannot + "the node's cluster membership lapsed (" + e.description +
                                               "); attach again once it has rejoined"};
    }
    return error{errc::internal_error, cannot + e.description}; // not reached: every code is handled above
}

// Attaches that waited for a move: answer those whose move ended (all: the
// node stops), refuse those that waited too long.
void wlm_service::answer_parked(bool all) {
    std::vector<std::pair<done_fn, plugins::resolution>> answers;
    {
        std::lock_guard l(mu_);
        const auto now = clock::now();
        for (auto it = parked_.begin(); it != parked_.end();) {
            auto o = owners_.find(it->queue);
            // (An owner gone down meanwhile: answered at once, as down.)
            const bool moving = o != owners_.end() && park_locked(o->second);
            if (moving && now < it->deadline && !all) {
                ++it;
                continue;
            }
            answers.emplace_back(std::move(it->done),
                                 !moving ? (o != owners_.end() ? answer_locked(it->queue)
                                                               : plugins::resolution::refuse(
                                                                     errc::not_found, "queue '" + it->queue +
                                                                                          "' has no owner"))
                                         : plugins::resolution::refuse(
                                               errc::detach_forced,
                                               "queue '" + it->queue + "' is still moving from node " +
                                                   o->second.node + " to node " + o->second.to + " after " +
                                                   seconds_text(opts_.park_timeout) +
                                                   " s; attach again later"));
            it = parked_.erase(it);
        }
    }
    for (auto& [done, r] : answers) done(std::move(r));
}

void wlm_service::run() {
    std::unique_lock l(mu_);
    while (!stop_) {
        cv_.wait_for(l, opts_.poll, [this] { return stop_ || woken_ || !requests_.empty(); });
        if (stop_) break;
        std::deque<request> work;
        work.swap(requests_);
        if (std::exchange(woken_, false)) next_reconcile_ = clock::now();
        l.unlock();
        poll_changes();
        const auto unplaceable = place_new(work);
        for (auto& r : work) serve(r, unplaceable);
        answer_parked(false);
        const auto now = clock::now();
        if (now >= next_reconcile_) {
            if (reconcile_due(now)) reconcile();
            next_reconcile_ = clock::now() + opts_.poll;
        }
        if (now >= next_heartbeat_) {
            heartbeat();
            next_heartbeat_ = clock::now() + opts_.lease_ttl / 3;
        }
        l.lock();
    }
}

} // namespace wharf::wlm
