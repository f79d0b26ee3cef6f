// load(): flags (CLI11) over the file (config_file.cpp) over the defaults.

#include "broker/config/node_config.hpp"
#include "broker/config/config_layer.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <sys/stat.h>
#include <set>
#include <thread>
#include <unistd.h>

#ifndef WHARF_VERSION
#define WHARF_VERSION "unknown"
#endif

namespace wharf::config {
namespace {

using detail::file_layer;
using detail::listener_entry;
using detail::top_layer;

constexpr const char* default_data_dir = "./wharf-data";

// A flag's text, read as whichever type its key wants.
class flag_source final : public detail::value_source {
  public:
    explicit flag_source(std::string text) : text_(std::move(text)) {}

    result<std::string, std::string> get_string() const override { return text_; }
    result<int64_t, std::string> get_integer() const override {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
        if (ec == std::errc::result_out_of_range) return fail(std::string("out of range"));
        if (ec != std::errc() || end != text_.data() + text_.size())
            return fail(std::string("expected an integer"));
        return v;
    }
    result<bool, std::string> get_bool() const override {
        if (text_ == "true") return true;
        if (text_ == "false") return false;
        return fail(std::string("expected true or false"));
    }
    result<double, std::string> get_seconds() const override {
        double v = 0;
        auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
        if (ec != std::errc() || end != text_.data() + text_.size())
            return fail(std::string("expected a number of seconds"));
        return v;
    }
    result<std::vector<std::string>, std::string> get_string_list() const override {
        return std::vector<std::string>{text_};
    }

  private:
    std::string text_;
};

// A repeated flag's values, for keys that take a list.
class list_source final : public detail::value_source {
  public:
    explicit list_source(const std::vector<std::string>& v) : v_(v) {}
    result<std::string, std::string> get_string() const override { return fail(std::string("expected one value")); }
    result<int64_t, std::string> get_integer() const override { return fail(std::string("expected a number")); }
    result<bool, std::string> get_bool() const override { return fail(std::string("expected true or false")); }
    result<double, std::string> get_seconds() const override { return fail(std::string("expected seconds")); }
    result<std::vector<std::string>, std::string> get_string_list() const override { return v_; }

  private:
    const std::vector<std::string>& v_;
};

struct flag_doc {
    std::string_view key;
    const char* type_name;
    const char* help;
};

// In the order --help lists them; every key of detail::top_keys().
constexpr std::array<flag_doc, 18> flag_docs = {{
    {"listen", "HOST:PORT",
     "Accept AMQP connections on HOST:PORT (IPv6 as [::1]:5672; port 0 = any free port). "
     "Repeat for several listeners; replaces the file's listeners. Default 127.0.0.1:5672"},
    {"data-dir", "DIR", "Directory for the node's data. Default ./wharf-data"},
    {"node-id", "ID", "This node's AMQP container id. Default wharf-<hostname>"},
    {"log-level", "LEVEL", "One of trace, debug, info, warn, error, off. Default info"},
    {"threads", "N", "Worker threads; 0 = one less than the cores, at least 1 (max 1024). Default 0"},
    {"busy-poll", "MICROSECONDS",
     "With one worker thread: how long it keeps polling for the next event before it sleeps, "
     "at most (the window adapts to how soon events come); saves a wake-up on each message "
     "that finds the node idle, at the cost of CPU while events come closer than this. "
     "0 = always sleep; at most 100000. Default 200"},
    {"auto-create-queues", "true|false",
     "Create a queue when a link attaches to an unknown address. Default true"},
    {"max-connections", "N", "Open connections allowed; 0 = unlimited. Default 10000"},
    {"max-message-size", "BYTES",
     "Largest message accepted, advertised on attach; 0 = the most a message can be "
     "(4294836224, 4 GiB - 128 KiB). Default 16777216"},
    {"credit-window", "N", "Link credit given to producers, refilled at half; 1 to 2147483647. Default 1000"},
    {"producer-credit-budget", "N",
     "Credit all producer links of the node share: with more than N / credit-window producers "
     "each gets N / producers (at least 20); 0 = no budget. Default 20000"},
    {"connection-credit-budget", "N",
     "Credit the producer links of one connection hold together (with many connections, at most "
     "their share of producer-credit-budget); with more producers than fit, they take turns. "
     "0 = no budget. Default 2000"},
    {"max-frame-size", "N",
     "AMQP max-frame-size in bytes, >= 512, for listeners that set none of their own. "
     "Default 65536"},
    {"idle-timeout", "SECONDS",
     "AMQP idle time-out (may be fractional; 0 = none) for listeners that set none of their "
     "own, and for the relay connections this node opens to other nodes. Default 60"},
    {"plugins", "NAME",
     "Load the plugin NAME (wharf-plugin-NAME.so); repeat for several. Also --plugin. "
     "Default none"},
    {"plugin-dir", "DIR", "Where plugins are found. Default ../lib/wharf (or ../lib) beside wharfd"},
    {"advertise", "HOST:PORT",
     "The address other nodes and redirected clients use to reach this node. Default: the first "
     "listener's"},
    {"metadata", "sqlite:PATH|etcd://HOST:PORT[,...][/PREFIX]", "The cluster's shared metadata store (with the wlm plugin)"},
}};

constexpr const char* help_footer =
    "Every flag above except --config, --help and --version is also a key of the same name "
    "in the TOML config file, e.g. node-id = \"n1\" or listen = [\"127.0.0.1:5672\"]; a flag "
    "given on the command line overrides the file. The file also accepts [[listener]] tables "
    "(address, max-frame-size, idle-timeout), a [queue-defaults] table and [[queue]] tables "
    "(name, max-depth-messages, max-depth-bytes, overflow-policy, dead-letter-queue, "
    "max-delivery-count, expiry-policy, durable). See broker/config/wharfd.example.toml.";

std::string host_port(const listener_config& l) {
    bool v6 = l.host.find(':') != std::string::npos;
    return (v6 ? "[" + l.host + "]" : l.host) + ":" + std::to_string(l.port);
}

result<std::string, config_error> read_file(const std::string& path) {
    auto cannot = [&](int err) {
        return fail(config_error{2, "config " + path + ": cannot read: " + std::strerror(err)});
    };
    // Non-blocking, so that a FIFO with no writer cannot hold the start up;
    // only a regular file is read (a device such as /dev/zero never ends).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return cannot(errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return cannot(err);
    }
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO or pipe"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : nullptr;
    if (kind != nullptr || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(config_error{2, "config " + path + ": is " + (kind ? kind : "not a regular file") +
                                        ", not a regular file: give the path of a TOML file"});
    }
    constexpr off_t max_config_bytes = 16 << 20;
    if (st.st_size > max_config_bytes) {
        ::close(fd);
        return fail(config_error{2, "config " + path + ": is " + std::to_string(st.st_size) +
                                        " bytes, more than a config file's 16 MiB: is it the right file?"});
    }
    std::string text;
    char buf[8192];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            return cannot(err);
        }
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
}

std::string default_node_id() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "wharf-localhost";
    return std::string("wharf-") + name;
}

} // namespace

namespace detail {

result<node_config, config_error> resolve(node_config base, const file_layer& file,
                                          const top_layer& flags) {
    node_config cfg = std::move(base);
    auto pick = [](auto& field, const auto& from_file, const auto& from_flags) {
        if (from_flags) field = *from_flags;
        else if (from_file) field = *from_file;
    };
    const top_layer& f = file.top;
    pick(cfg.node_id, f.node_id, flags.node_id);
    pick(cfg.data_dir, f.data_dir, flags.data_dir);
    pick(cfg.log_level, f.log_level, flags.log_level);
    pick(cfg.threads, f.threads, flags.threads);
    pick(cfg.busy_poll_us, f.busy_poll_us, flags.busy_poll_us);
    pick(cfg.auto_create_queues, f.auto_create_queues, flags.auto_create_queues);
    pick(cfg.max_connections, f.max_connections, flags.max_connections);
    pick(cfg.max_message_size, f.max_message_size, flags.max_message_size);
    pick(cfg.credit_window, f.credit_window, flags.credit_window);
    pick(cfg.producer_credit_budget, f.producer_credit_budget, flags.producer_credit_budget);
    pick(cfg.connection_credit_budget, f.connection_credit_budget, flags.connection_credit_budget);
    pick(cfg.plugins, f.plugins, flags.plugins);
    pick(cfg.plugin_dir, f.plugin_dir, flags.plugin_dir);
    pick(cfg.advertise, f.advertise, flags.advertise);
    pick(cfg.metadata, f.metadata, flags.metadata);
    // Only a plugin (the wlm) reads it: without one, a node started with it
    // would run alone as if it were in a cluster.
    if (!cfg.metadata.empty() && cfg.plugins.empty())
        return fail(config_error{2, "metadata '" + cfg.metadata +
                                        "' is set but no plugin is enabled to use it: add plugins = [\"wlm\"] "
                                        "(or --plugin wlm), or drop metadata"});
    for (const auto& [plugin, keys] : file.plugin_options) {
        if (std::find(cfg.plugins.begin(), cfg.plugins.end(), plugin) == cfg.plugins.end())
            return fail(config_error{2, "[plugin." + plugin + "]: plugin '" + plugin +
                                            "' is configured but not enabled (plugins = [...])"});
        cfg.plugin_options[plugin] = keys;
    }
    if (cfg.data_dir.empty()) cfg.data_dir = default_data_dir;

    // Listeners: the flags' set replaces the file's, which replaces base's.
    // Top-level frame size and idle timeout fill in what a listener left unset.
    std::optional<uint32_t> frame = flags.max_frame_size ? flags.max_frame_size : f.max_frame_size;
    std::optional<std::chrono::milliseconds> idle =
        flags.idle_timeout ? flags.idle_timeout : f.idle_timeout;
    if (idle) cfg.idle_timeout = *idle;
    const auto* entries = flags.listeners ? &*flags.listeners
                          : f.listeners   ? &*f.listeners
                                          : nullptr;
    if (entries) {
        cfg.listeners.clear();
        std::set<std::pair<std::string, uint16_t>> seen;
        for (const listener_entry& e : *entries) {
            listener_config l = e.cfg;
            if (frame && !e.own_max_frame_size) l.max_frame_size = *frame;
            if (idle && !e.own_idle_timeout) l.idle_timeout = *idle;
            if (l.port != 0 && !seen.emplace(l.host, l.port).second)
                return fail(config_error{2, e.where + ": listener " + host_port(l) +
                                                " is configured twice"});
            cfg.listeners.push_back(std::move(l));
        }
    } else {
        if (cfg.listeners.empty()) cfg.listeners.push_back(listener_config{});
        for (auto& l : cfg.listeners) {
            if (frame) l.max_frame_size = *frame;
            if (idle) l.idle_timeout = *idle;
        }
    }

    file.queue_defaults.apply_to(cfg.queue_defaults);
    for (const auto& q : file.queues) {
        for (const auto& existing : cfg.queues) {
            if (existing.name == q.name)
                return fail(config_error{2, q.where + ": key 'name' in [[queue]]: duplicate "
                                                      "queue name '" + q.name + "'"});
        }
        queue_declaration d{q.name, cfg.queue_defaults};
        q.overrides.apply_to(d.policy);
        cfg.queues.push_back(std::move(d));
    }
    return cfg;
}

} // namespace detail

result<node_config, config_error> parse_toml(std::string_view text, std::string_view origin,
                                             node_config base) {
    auto file = detail::parse_file(text, origin);
    if (!file) return fail(file.error());
    return detail::resolve(std::move(base), *file, top_layer{});
}

unsigned default_threads(unsigned cores) { return cores > 1 ? cores - 1 : 1; }

result<node_config, config_error> load(int argc, const char* const* argv) {
    CLI::App app{"wharfd: the Wharf AMQP 1.0 broker", "wharfd"};
    app.footer(help_footer);
    app.get_formatter()->column_width(34);

    std::string config_path;
    auto* config_opt = app.add_option("--config", config_path, "Read settings from this TOML file")
                           ->type_name("FILE");
    bool version = false;
    app.add_flag("--version", version, "Print the version and exit");

    std::vector<std::string> listen_texts;
    std::vector<std::string> plugin_names;
    std::deque<std::string> values; // stable addresses for CLI11 to write into
    std::vector<std::pair<std::string_view, CLI::Option*>> scalar_options;
    for (const auto& doc : flag_docs) {
        const std::string name = "--" + std::string(doc.key);
        if (doc.key == "listen") {
            app.add_option(name, listen_texts, doc.help)
                ->type_name(doc.type_name)
                ->allow_extra_args(false);
        } else if (doc.key == "plugins") {
            app.add_option("--plugin,--plugins", plugin_names, doc.help)
                ->type_name(doc.type_name)
                ->allow_extra_args(false);
        } else {
            auto* opt = app.add_option(name, values.emplace_back(), doc.help)
                            ->type_name(doc.type_name)
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
            scalar_options.emplace_back(doc.key, opt);
        }
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::Success&) { // --help
        return fail(config_error{0, app.help()});
    } catch (const CLI::ParseError& e) {
        return fail(config_error{2, std::string("wharfd: ") + e.what() + " (see --help)"});
    }
    if (version) return fail(config_error{0, std::string("wharfd ") + WHARF_VERSION});

    // Flags first, so a bad flag is reported even when the file is also bad.
    top_layer flags;
    for (std::size_t i = 0; i < scalar_options.size(); ++i) {
        auto [key, opt] = scalar_options[i];
        if (opt->count() == 0) continue;
        const std::string& text = values[i];
        if (auto bad = detail::set_top_key(flags, key, flag_source(text), "--" + std::string(key)))
            return fail(config_error{2, "--" + std::string(key) + " '" + text + "': " + *bad});
    }
    if (!listen_texts.empty()) {
        flags.listeners.emplace();
        for (const auto& text : listen_texts) {
            auto l = parse_listen(text);
            if (!l) return fail(config_error{2, "--listen '" + text + "': " + l.error()});
            flags.listeners->push_back({*l, false, false, "--listen"});
        }
    }

    if (!plugin_names.empty()) {
        // Same checks as the file's `plugins` key.
        if (auto bad = detail::set_top_key(flags, "plugins", list_source(plugin_names), "--plugin"))
            return fail(config_error{2, "--plugin: " + *bad});
    }

    file_layer file;
    if (config_opt->count() > 0) {
        auto text = read_file(config_path);
        if (!text) return fail(text.error());
        auto parsed = detail::parse_file(*text, config_path);
        if (!parsed) return fail(parsed.error());
        file = std::move(*parsed);
    }

    auto cfg = detail::resolve(node_config{}, file, flags);
    if (!cfg) return cfg;
    if (cfg->node_id.empty()) cfg->node_id = default_node_id();
    if (cfg->threads == 0) cfg->threads = default_threads(std::thread::hardware_concurrency());
    return cfg;
}

} // namespace wharf::config
