#pragma once
// Internal to broker/config: one "layer" of settings (what the file said, or
// what the flags said), with every field optional so layers can be stacked:
// defaults, then the file, then the flags. File and flags share one key
// dispatcher, so a key is validated the same way wherever it came from.
//
// Main thread only, at start.

#include "broker/config/node_config.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::config::detail {

// A listener as configured, remembering whether it set its own frame size
// and idle timeout (if not, the top-level values apply).
struct listener_entry {
    listener_config cfg;
    bool own_max_frame_size = false;
    bool own_idle_timeout = false;
    std::string where; // "config f.toml:7" or "--listen"; for messages
};

// The top-level keys: every one is also a command-line flag.
struct top_layer {
    std::optional<std::string> node_id;
    std::optional<std::vector<listener_entry>> listeners; // `listen` + [[listener]]
    std::optional<std::string> data_dir;
    std::optional<std::string> log_level;
    std::optional<unsigned> threads;
    std::optional<uint32_t> busy_poll_us;
    std::optional<bool> auto_create_queues;
    std::optional<uint32_t> max_connections;
    std::optional<uint64_t> max_message_size;
    std::optional<uint32_t> credit_window;
    std::optional<uint64_t> producer_credit_budget;
    std::optional<uint64_t> connection_credit_budget;
    std::optional<uint32_t> max_frame_size;
    std::optional<std::chrono::milliseconds> idle_timeout;
    std::optional<std::vector<std::string>> plugins;
    std::optional<std::string> plugin_dir;
    std::optional<std::string> advertise;
    std::optional<std::string> metadata;
};

struct policy_layer {
    std::optional<uint64_t> max_depth_messages;
    std::optional<uint64_t> max_depth_bytes;
    std::optional<overflow_policy> overflow;
    std::optional<std::string> dead_letter_queue;
    std::optional<uint32_t> max_delivery_count;
    std::optional<expiry_policy> expiry;
    std::optional<bool> durable;

    void apply_to(queue_policy& p) const;
};

struct queue_entry {
    std::string name;
    policy_layer overrides;
    std::string where;
};

// Everything a config file can say.
struct file_layer {
    top_layer top;
    policy_layer queue_defaults;
    std::vector<queue_entry> queues;
    std::map<std::string, std::map<std::string, std::vector<std::string>>> plugin_options;
};

// One value to be checked against a key's type and range. Implemented over a
// TOML node (config_file.cpp) and over a flag's text (node_config.cpp).
// Each getter returns the value or the reason it is unacceptable, worded to
// follow "key 'x': " or "--x 'text': ".
class value_source {
  public:
    virtual ~value_source() = default;
    virtual result<std::string, std::string> get_string() const = 0;
    virtual result<int64_t, std::string> get_integer() const = 0;
    virtual result<bool, std::string> get_bool() const = 0;
    // Seconds, integer or fractional.
    virtual result<double, std::string> get_seconds() const = 0;
    // One or more "HOST:PORT" strings.
    virtual result<std::vector<std::string>, std::string> get_string_list() const = 0;
};

// Keys accepted at the top level of the file (excluding the tables
// listener, queue-defaults, queue) and, with "--" in front, as flags.
std::span<const std::string_view> top_keys();
std::span<const std::string_view> listener_keys();   // [[listener]]
std::span<const std::string_view> policy_keys();     // [queue-defaults]
std::span<const std::string_view> queue_keys();      // [[queue]]: name + policy keys

bool is_key_of(std::span<const std::string_view> keys, std::string_view key);

// "unknown key 'max-frame-sise' (did you mean 'max-frame-size'?)"
std::string unknown_key_message(std::string_view key, std::span<const std::string_view> keys);

// Set one top-level key (must be in top_keys()). `where` labels listeners
// created by `listen`. Returns the reason on failure.
std::optional<std::string> set_top_key(top_layer& layer, std::string_view key,
                                       const value_source& v, const std::string& where);

// Set one key of a [[listener]] table other than `address`.
std::optional<std::string> set_listener_key(listener_entry& l, std::string_view key,
                                            const value_source& v);

// Set one policy key ([queue-defaults] or [[queue]], not `name`).
std::optional<std::string> set_policy_key(policy_layer& p, std::string_view key,
                                          const value_source& v);

// Checks a queue name; returns the reason it is unacceptable.
std::optional<std::string> check_queue_name(std::string_view name);

// The file's text parsed into a layer; `origin` names the file in messages.
result<file_layer, config_error> parse_file(std::string_view text, std::string_view origin);

// Stacks the layers on `base`: file over base, flags over file.
result<node_config, config_error> resolve(node_config base, const file_layer& file,
                                          const top_layer& flags);

} // namespace wharf::config::detail
