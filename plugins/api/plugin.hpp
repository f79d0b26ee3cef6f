#pragma once
// The plugin API: everything a plugin may know of the broker, and everything
// the broker knows of a plugin. Plugins are shared libraries
// `wharf-plugin-NAME.so` exporting `wharf_plugin_factory_v1()`; the broker
// names no plugin. Small interfaces, in the manner of Envoy's factories:
// a factory validates its options once and creates the plugin once per node.
//
// Threads: factories and plugin start/stop run on the main thread.
// address_resolver::resolve runs on a connection's proactor thread and must
// not block; node_context methods are thread-safe (those that wait for the
// queue engine say so: never call them from a resolver or a tap callback).

#include "broker/common/errors.hpp"
#include "broker/common/result.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace wharf::plugins {

// What an address means on this node.
struct resolution {
    enum class kind {
        pass,     // not this resolver's business: ask the next one (none left: local)
        local,    // the queue is here
        redirect, // the queue is on another node: detach with amqp:link:redirect
        refuse,   // detach with `err`
        relay,    // the queue is on another node: this node relays the link to it
    };
    kind what = kind::pass;
    std::string node_id;          // redirect, relay: the owner
    std::string host;             // redirect, relay: where the owner is reached
    uint16_t port = 0;
    std::string address;          // redirect, relay: the address at the owner
    error err{errc::internal_error, {}};

    static resolution local() { return {kind::local, {}, {}, 0, {}, {errc::internal_error, {}}}; }
    static resolution pass() { return {}; }
    static resolution refuse(errc code, std::string description) {
        return {kind::refuse, {}, {}, 0, {}, {code, std::move(description)}};
    }
    static resolution redirect(std::string node, std::string host, uint16_t port, std::string address) {
        return {kind::redirect, std::move(node), std::move(host), port, std::move(address),
                {errc::internal_error, {}}};
    }
    static resolution relay(std::string node, std::string host, uint16_t port, std::string address) {
        return {kind::relay, std::move(node), std::move(host), port, std::move(address),
                {errc::internal_error, {}}};
    }
};

// The link property a node puts on the links it opens to hand messages to
// another node (a queue move, a returning node's leftovers): its value is
// the sending node's id.
inline constexpr std::string_view forwarded_from_property = "wharf:forwarded-from";

// One attach, as a resolver sees it.
struct attach_request {
    std::string_view address;
    bool incoming = false;           // the client sends (a producer link)
    std::string_view forwarded_from; // set: another node hands messages over (see above)
};

// Takes part in deciding what an attach's address means.
class address_resolver {
  public:
    virtual ~address_resolver() = default;
    // Calls `done` exactly once, on any thread, now or later. Must not block.
    virtual void resolve(const attach_request& request, std::function<void(resolution)> done) = 0;
    // The answer if it is known now (anonymous-relay messages, one call per
    // message: must be cheap); nullopt when it is not known yet, in which
    // case the resolver may start finding out.
    virtual std::optional<resolution> lookup(std::string_view address) {
        (void)address;
        return resolution::pass();
    }
};

struct node_info {
    std::string node_id;
    std::string host;             // advertised
    uint16_t port = 0;
    std::string data_dir;
    std::string metadata;         // --metadata, e.g. "sqlite:/path"
};

// The node's load, for placement.
struct load_figures {
    uint64_t queues = 0;
    uint64_t messages = 0;
    uint64_t connections = 0;
};

// A queue held on this node, as the queue engine sees it now.
struct local_queue {
    std::string name;
    uint64_t depth = 0;     // messages held (available and out for delivery)
    uint64_t links = 0;     // client links attached (consumers and producers; no taps)
    bool dynamic = false;   // a temporary queue (no cluster owner)
};

// Where a link being ended should go instead (AMQP link redirect).
struct redirect_target {
    std::string node_id;
    std::string host;
    uint16_t port = 0;
};

// One message taken from a queue by a tap: its bytes as a consumer would
// receive them (the header rewritten when it was delivered before).
struct tapped_message {
    uint64_t seq = 0;
    std::string bytes;
};

// A consumer inside the node that takes a queue's messages to move them
// elsewhere. Messages come in queue order as credit allows; each must be
// settled: done (it is gone from this node) or not (it goes back to the
// queue as it was). Destroying the tap returns what it has not settled.
class queue_tap {
  public:
    virtual ~queue_tap() = default;
    virtual void credit(uint64_t more) = 0;
    virtual void settle(uint64_t seq, bool done) = 0;
};

using timer_id = uint64_t;

struct queue_settings; // plugins/api/queue_settings.hpp

// AMQP management (the broker's $management node serves these): one entity
// is a map of attribute name to value. A floating-point number (AMQP float
// or double) is a double: an operation that takes a number in decimals
// takes it, and one that takes text refuses it rather than read "1.5" as
// a name.
using attribute_value = std::variant<std::monostate, bool, int64_t, std::string, double>;
using entity = std::map<std::string, attribute_value>;

// A kind of entity a plugin manages, e.g. "wharf.owner": the broker
// answers QUERY and READ from query(), and hands every other operation the
// type declares to invoke(). Several types may share one name (the broker's
// wharf.queue and a plugin's): QUERY merges their entities by name, and an
// operation goes to the last registered type that declares it and
// handles() it. Methods may block: management runs on threads of its own,
// one for requests that other nodes send (application property
// `wharf:scope` = "node"; types that asks_peers() are left out of those, so
// nodes asking each other never wait in a circle) and one for the rest. So
// a type's methods may run on two threads at once.
class entity_type {
  public:
    virtual ~entity_type() = default;
    virtual std::string_view type_name() const = 0;
    virtual std::vector<std::string> attribute_names() const = 0;
    // Beyond READ and QUERY, e.g. {"MOVE"}.
    virtual std::vector<std::string> operation_names() const = 0;
    // Every entity of the type, each with at least "name".
    virtual result<std::vector<entity>, error> query() = 0;
    // For READ: entities among which the one named `name` is, if it exists
    // (the caller picks it out). A type whose query() is costly (it asks
    // other nodes) narrows the work here.
    virtual result<std::vector<entity>, error> read(std::string_view name) {
        (void)name;
        return query();
    }
    // `name` is the entity's name; `args` the request's application
    // properties and body map. The result is the response body.
    virtual result<entity, error> invoke(std::string_view operation, std::string_view name,
                                         const entity& args) = 0;
    // Whether this type takes `operation` on `name` (one it declares), or
    // leaves it to a type registered earlier under the same name.
    virtual bool handles(std::string_view operation, std::string_view name) {
        (void)operation;
        (void)name;
        return true;
    }
    // True if query() or invoke() ask other nodes.
    virtual bool asks_peers() const { return false; }
};

// What the broker offers a plugin.
class node_context {
  public:
    virtual ~node_context() = default;
    virtual const node_info& node() const = 0;
    // Before start() returns: join the resolver chain (in plugin order).
    virtual void add_resolver(address_resolver& r) = 0;
    virtual load_figures load() = 0;
    // Ends every client link attached to one of `queues` with `err`; with a
    // target, `err` should be errc::redirect and the detach carries the
    // target's address (AMQP link redirect info).
    virtual void detach_links(std::vector<std::string> queues, error err,
                              std::optional<redirect_target> target = std::nullopt) = 0;

    // The queues this node holds now. Waits for the queue engine.
    virtual std::vector<local_queue> queues() = 0;
    // Changes whenever this node creates or removes a queue (temporary
    // queues aside); does not wait.
    // A plugin that walks queues() on a timer can skip the walk while it
    // stays the same (and nothing else it watches changed).
    virtual uint64_t queue_set_version() const = 0;
    // Takes `queue`'s messages: `on_messages` runs on the queue engine's
    // thread, must be quick and must not call back into the node_context
    // (hand the work to another thread). Creates the queue if it is missing.
    virtual std::unique_ptr<queue_tap> tap(const std::string& queue,
                                           std::function<void(std::vector<tapped_message>)> on_messages) = 0;
    // Removes `queue` if it holds no message and no link; true if it is gone
    // (or never was). Waits for the queue engine.
    virtual bool delete_queue_if_idle(const std::string& queue) = 0;
    // Applies management's settings to `queue` (on top of its policy);
    // false if this node has no such queue. Waits for the queue engine.
    virtual bool configure_queue(const std::string& queue, const queue_settings& settings) = 0;
    // Deletes `queue`, its messages (stored ones too) and its links; false
    // if this node has no such queue. Waits for the queue engine.
    virtual bool remove_queue(const std::string& queue) = 0;

    // Before start() returns: offer an entity type to AMQP management.
    virtual void add_entity_type(entity_type& t) = 0;

    // Runs `fn` every `period` on the node's timer thread until cancelled
    // (or the node stops). `fn` must be quick: other plugins' timers wait.
    virtual timer_id run_every(std::chrono::milliseconds period, std::function<void()> fn) = 0;
    // After it returns, `fn` of that timer is not running and will not run.
    virtual void cancel(timer_id id) = 0;
};

using options = std::map<std::string, std::vector<std::string>>;

class plugin {
  public:
    virtual ~plugin() = default;
    // Returns a message naming what failed (it stops the node at start).
    virtual std::optional<std::string> start() = 0;
    virtual void stop() = 0;
};

class plugin_factory {
  public:
    virtual ~plugin_factory() = default;
    virtual std::string_view name() const = 0;
    // A bad option: the message names the key ("plugin.wlm.placement: ...").
    virtual std::optional<std::string> validate(const options& opts, const node_info& node) const = 0;
    virtual std::unique_ptr<plugin> create(const options& opts, node_context& ctx) const = 0;
};

} // namespace wharf::plugins

// Exported by every plugin library (C linkage: found with dlsym).
extern "C" const wharf::plugins::plugin_factory* wharf_plugin_factory_v1();
