#pragma once
// The node's configuration: command-line flags and a TOML config file
// (parsed with toml++), validated once at start. Every flag has the same key
// in the file; a flag given on the command line overrides the file.
//
// Pure data and pure functions: built on the main thread before anything
// starts, read-only afterwards.

#include "broker/common/result.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wharf::config {

enum class overflow_policy { block, reject };
enum class expiry_policy { drop, dead_letter };

// Per-queue settings. A queue declared in config takes these from
// [queue-defaults] and overrides any of them in its own [[queue]] table.
struct queue_policy {
    uint64_t max_depth_messages = 0;   // 0 = unlimited
    uint64_t max_depth_bytes = 0;      // 0 = unlimited
    overflow_policy overflow = overflow_policy::block;
    std::string dead_letter_queue = "DLQ"; // "" = drop instead of dead-lettering
    uint32_t max_delivery_count = 10;  // 0 = unlimited
    expiry_policy expiry = expiry_policy::drop;
    bool durable = true;               // used by the durable store (later issue)
};

struct queue_declaration {
    std::string name;
    queue_policy policy;
};

struct listener_config {
    std::string host = "127.0.0.1";
    uint16_t port = 5672;              // 0 = the OS picks a free port
    uint32_t max_frame_size = 65536;   // bytes, >= 512 (AMQP minimum)
    std::chrono::milliseconds idle_timeout{60000}; // 0 = none
};

struct node_config {
    std::string node_id;               // default: "wharf-" + hostname
    std::vector<listener_config> listeners; // default: one on 127.0.0.1:5672
    std::string data_dir;              // default: "./wharf-data"
    std::string log_level = "info";    // trace, debug, info, warn, error, off
    unsigned threads = 0;              // 0 = default_threads(cores)
    uint32_t busy_poll_us = 200;       // a lone worker polls up to this long before it sleeps (0 = never)
    bool auto_create_queues = true;
    uint32_t max_connections = 10000;  // 0 = unlimited
    uint64_t max_message_size = 16 * 1024 * 1024; // bytes, advertised on attach
    // The top-level idle-timeout: listeners that set none of their own get
    // it, and so do the connections this node opens to other nodes (0 = none).
    std::chrono::milliseconds idle_timeout{60000};
    uint32_t credit_window = 1000;     // producer link credit; refilled at half
    uint64_t producer_credit_budget = 20000; // shared by all producer links (0 = none)
    uint64_t connection_credit_budget = 2000; // shared by one connection's producer links, in turns (0 = none)
    queue_policy queue_defaults;
    std::vector<queue_declaration> queues;

    // Cluster. Plugins are shared libraries `wharf-plugin-NAME.so` loaded
    // from plugin_dir ("" = ../lib/wharf next to the wharfd binary, or
    // ../lib in a build tree).
    std::vector<std::string> plugins;
    std::string plugin_dir;
    std::string advertise;             // HOST:PORT others reach this node at; "" = first listener
    std::string metadata;              // "sqlite:PATH" or "etcd://HOST:PORT[,...][/PREFIX]": the cluster's shared metadata store
    // [plugin.NAME] tables: key -> values (a scalar is one value, an array many).
    std::map<std::string, std::map<std::string, std::vector<std::string>>> plugin_options;

    // busy_poll_us where it applies: with one worker. With several, Proton
    // always has one of them asleep in epoll as its poller, and another's
    // poll (pn_proactor_get) returns at once with nothing.
    uint32_t busy_poll_in_effect() const { return threads == 1 ? busy_poll_us : 0; }
};

struct config_error {
    int exit_code;          // 2 for bad input; 0 for --help / --version
    std::string message;    // printed as-is: names the key and what is wrong (or the help text)
};

// Parses argv (and the file named by --config, if any) into a node_config.
// The worker threads `threads = 0` stands for on a host with `cores` cores:
// one less than the cores, at least one. A worker that has no core of its own
// costs a futex wake and a context switch at every hand-off between
// connections (docs/broker.md, "Threads"); the last core is left to the
// kernel's network work and to the clients beside the node.
unsigned default_threads(unsigned cores);

result<node_config, config_error> load(int argc, const char* const* argv);

// Parses a TOML document (the file's text) on top of `base`; `origin` names
// the file in messages. Exposed for tests.
result<node_config, config_error> parse_toml(std::string_view text, std::string_view origin,
                                             node_config base = {});

// Parses "HOST:PORT" (IPv6 as "[::1]:5672").
result<listener_config, std::string> parse_listen(std::string_view s);

} // namespace wharf::config
