// The keys, their types and ranges, shared by the file and the flags.

#include "broker/common/limits.hpp"
#include "broker/common/names.hpp"
#include "broker/config/config_layer.hpp"
#include "broker/config/node_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

namespace wharf::config {
namespace detail {
namespace {

constexpr std::array<std::string_view, 18> top_keys_ = {
    "node-id",       "listen",          "data-dir",         "log-level",
    "threads",       "auto-create-queues", "max-connections", "max-message-size",
    "credit-window", "producer-credit-budget", "connection-credit-budget", "max-frame-size",
    "idle-timeout",  "plugins",         "plugin-dir",       "advertise",
    "metadata",      "busy-poll",
};
constexpr std::array<std::string_view, 3> listener_keys_ = {"address", "max-frame-size",
                                                            "idle-timeout"};
constexpr std::array<std::string_view, 7> policy_keys_ = {
    "max-depth-messages", "max-depth-bytes",  "overflow-policy", "dead-letter-queue",
    "max-delivery-count", "expiry-policy",    "durable",
};
constexpr std::array<std::string_view, 8> queue_keys_ = {
    "name",
    "max-depth-messages", "max-depth-bytes",  "overflow-policy", "dead-letter-queue",
    "max-delivery-count", "expiry-policy",    "durable",
};
constexpr std::array<std::string_view, 6> log_levels_ = {"trace", "debug", "info",
                                                         "warn",  "error", "off"};

constexpr uint32_t amqp_min_max_frame_size = 512;
constexpr unsigned max_threads = 1024;
constexpr uint32_t max_busy_poll_us = 100000; // 0.1 s: more is a core spent, not a wake saved
constexpr uint32_t u32_max = std::numeric_limits<uint32_t>::max();
// Proton keeps a link's credit in a signed 32-bit int.
constexpr uint32_t max_credit_window = std::numeric_limits<int32_t>::max();
constexpr int64_t i64_max = std::numeric_limits<int64_t>::max();

std::string format_double(double d) {
    std::ostringstream os;
    os << d;
    return os.str();
}

std::string join(std::span<const std::string_view> words) {
    std::string out;
    for (auto w : words) {
        if (!out.empty()) out += ", ";
        out += w;
    }
    return out;
}

// An integer in [min, max]; `min_label` says whose minimum it is.
result<int64_t, std::string> integer_in(const value_source& v, int64_t min, int64_t max,
                                        std::string_view min_label = "minimum") {
    auto x = v.get_integer();
    if (!x) return x;
    if (*x < min) {
        if (min == 0) return fail(std::to_string(*x) + " is negative");
        return fail(std::to_string(*x) + " is below the " + std::string(min_label) + " of " +
                    std::to_string(min));
    }
    if (*x > max)
        return fail(std::to_string(*x) + " is above the maximum of " + std::to_string(max));
    return *x;
}

result<std::string, std::string> choice_of(const value_source& v,
                                           std::span<const std::string_view> allowed) {
    auto s = v.get_string();
    if (!s) return s;
    if (std::find(allowed.begin(), allowed.end(), *s) == allowed.end())
        return fail("'" + *s + "' is not one of: " + join(allowed));
    return s;
}

result<std::string, std::string> nonempty_string(const value_source& v) {
    auto s = v.get_string();
    if (!s) return s;
    if (s->empty()) return fail(std::string("must not be empty"));
    return s;
}

// AMQP's idle-time-out is a 32-bit count of milliseconds.
result<std::chrono::milliseconds, std::string> timeout_in(const value_source& v) {
    auto d = v.get_seconds();
    if (!d) return fail(d.error());
    constexpr double max_seconds = u32_max / 1000.0;
    if (!std::isfinite(*d)) return fail(std::string("must be a finite number of seconds"));
    if (*d < 0) return fail(format_double(*d) + " is negative");
    if (*d > max_seconds)
        return fail(format_double(*d) + " seconds is above the maximum of 4294967.295 (" +
                    "AMQP idle-time-out is a 32-bit count of milliseconds)");
    auto ms = std::llround(*d * 1000.0);
    if (*d > 0 && ms == 0)
        return fail(format_double(*d) + " seconds is below 1 ms (use 0 for no timeout)");
    // A node advertises half its idle-timeout, and a node refuses a peer's
    // under 100 ms (amqp_connection::min_peer_idle_timeout_ms): less than
    // 0.2 s here would have every other node refuse this one's relay
    // connections.
    if (ms > 0 && ms < 200)
        return fail(format_double(*d) + " seconds is below 0.2 s, the shortest a node takes (it advertises half, "
                                        "and refuses a peer's under 100 ms); use 0 for no timeout");
    return std::chrono::milliseconds(ms);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

} // namespace

std::span<const std::string_view> top_keys() { return top_keys_; }
std::span<const std::string_view> listener_keys() { return listener_keys_; }
std::span<const std::string_view> policy_keys() { return policy_keys_; }
std::span<const std::string_view> queue_keys() { return queue_keys_; }

bool is_key_of(std::span<const std::string_view> keys, std::string_view key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string unknown_key_message(std::string_view key, std::span<const std::string_view> keys) {
    std::string msg = "unknown key '" + std::string(key) + "'";
    std::string_view best;
    std::size_t best_distance = 3; // suggest only near misses
    for (auto k : keys) {
        auto d = edit_distance(key, k);
        if (d < best_distance) {
            best_distance = d;
            best = k;
        }
    }
    if (!best.empty()) msg += " (did you mean '" + std::string(best) + "'?)";
    return msg;
}

std::optional<std::string> set_top_key(top_layer& layer, std::string_view key,
                                       const value_source& v, const std::string& where) {
    if (key == "node-id") {
        auto s = nonempty_string(v);
        if (!s) return s.error();
        // The id is a field of the cluster's metadata records and part of
        // names like NODE/connection-N.
        if (auto bad = check_node_id(*s)) return bad;
        layer.node_id = *s;
    } else if (key == "listen") {
        auto list = v.get_string_list();
        if (!list) return list.error();
        std::vector<listener_entry> entries;
        for (const auto& text : *list) {
            auto l = parse_listen(text);
            if (!l) return "'" + text + "': " + l.error();
            entries.push_back({*l, false, false, where});
        }
        layer.listeners = std::move(entries);
    } else if (key == "data-dir") {
        auto s = nonempty_string(v);
        if (!s) return s.error();
        layer.data_dir = *s;
    } else if (key == "log-level") {
        auto s = choice_of(v, log_levels_);
        if (!s) return s.error();
        layer.log_level = *s;
    } else if (key == "threads") {
        auto n = integer_in(v, 0, max_threads);
        if (!n) return n.error();
        layer.threads = static_cast<unsigned>(*n);
    } else if (key == "auto-create-queues") {
        auto b = v.get_bool();
        if (!b) return b.error();
        layer.auto_create_queues = *b;
    } else if (key == "max-connections") {
        auto n = integer_in(v, 0, u32_max);
        if (!n) return n.error();
        layer.max_connections = static_cast<uint32_t>(*n);
    } else if (key == "max-message-size") {
        auto n = integer_in(v, 0, i64_max);
        if (!n) return n.error();
        layer.max_message_size = static_cast<uint64_t>(*n);
    } else if (key == "credit-window") {
        auto n = integer_in(v, 1, max_credit_window);
        if (!n) return n.error();
        layer.credit_window = static_cast<uint32_t>(*n);
    } else if (key == "busy-poll") {
        auto n = integer_in(v, 0, max_busy_poll_us);
        if (!n) return n.error();
        layer.busy_poll_us = static_cast<uint32_t>(*n);
    } else if (key == "producer-credit-budget") {
        auto n = integer_in(v, 0, i64_max);
        if (!n) return n.error();
        layer.producer_credit_budget = static_cast<uint64_t>(*n);
    } else if (key == "connection-credit-budget") {
        auto n = integer_in(v, 0, i64_max);
        if (!n) return n.error();
        layer.connection_credit_budget = static_cast<uint64_t>(*n);
    } else if (key == "max-frame-size") {
        auto n = integer_in(v, amqp_min_max_frame_size, u32_max, "AMQP minimum");
        if (!n) return n.error();
        layer.max_frame_size = static_cast<uint32_t>(*n);
    } else if (key == "idle-timeout") {
        auto t = timeout_in(v);
        if (!t) return t.error();
        layer.idle_timeout = *t;
    } else if (key == "plugins") {
        auto list = v.get_string_list();
        if (!list) return list.error();
        for (const auto& name : *list) {
            const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
            });
            if (!ok)
                return "'" + name + "' is not a plugin name (lower-case letters, digits, '-', '_')";
            if (std::count(list->begin(), list->end(), name) > 1)
                return "'" + name + "' is listed twice (a plugin is loaded once)";
        }
        layer.plugins = *list;
    } else if (key == "plugin-dir") {
        auto s = nonempty_string(v);
        if (!s) return s.error();
        layer.plugin_dir = *s;
    } else if (key == "advertise") {
        auto s = nonempty_string(v);
        if (!s) return s.error();
        auto l = parse_listen(*s);
        if (!l) return "'" + *s + "': " + l.error();
        if (l->port == 0) return "'" + *s + "': an advertised address needs a real port";
        layer.advertise = *s;
    } else if (key == "metadata") {
        auto s = nonempty_string(v);
        if (!s) return s.error();
        // The form only; the wlm plugin checks the rest when it starts.
        const bool sqlite = s->rfind("sqlite:", 0) == 0 && s->size() > 7;
        const bool etcd = s->rfind("etcd://", 0) == 0 && s->size() > 7;
        if (!sqlite && !etcd)
            return "'" + *s + "': expected sqlite:PATH or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";
        layer.metadata = *s;
    } else {
        return unknown_key_message(key, top_keys_);
    }
    return std::nullopt;
}

std::optional<std::string> set_listener_key(listener_entry& l, std::string_view key,
                                            const value_source& v) {
    if (key == "max-frame-size") {
        auto n = integer_in(v, amqp_min_max_frame_size, u32_max, "AMQP minimum");
        if (!n) return n.error();
        l.cfg.max_frame_size = static_cast<uint32_t>(*n);
        l.own_max_frame_size = true;
    } else if (key == "idle-timeout") {
        auto t = timeout_in(v);
        if (!t) return t.error();
        l.cfg.idle_timeout = *t;
        l.own_idle_timeout = true;
    } else {
        return unknown_key_message(key, listener_keys_);
    }
    return std::nullopt;
}

std::optional<std::string> set_policy_key(policy_layer& p, std::string_view key,
                                          const value_source& v) {
    if (key == "max-depth-messages") {
        auto n = integer_in(v, 0, i64_max);
        if (!n) return n.error();
        p.max_depth_messages = static_cast<uint64_t>(*n);
    } else if (key == "max-depth-bytes") {
        auto n = integer_in(v, 0, i64_max);
        if (!n) return n.error();
        p.max_depth_bytes = static_cast<uint64_t>(*n);
    } else if (key == "overflow-policy") {
        static constexpr std::array<std::string_view, 2> allowed = {"block", "reject"};
        auto s = choice_of(v, allowed);
        if (!s) return s.error();
        p.overflow = *s == "block" ? overflow_policy::block : overflow_policy::reject;
    } else if (key == "dead-letter-queue") {
        auto s = v.get_string();
        if (!s) return s.error();
        if (!s->empty()) {
            if (auto bad = check_queue_name(*s)) return bad;
        }
        p.dead_letter_queue = *s;
    } else if (key == "max-delivery-count") {
        auto n = integer_in(v, 0, u32_max);
        if (!n) return n.error();
        p.max_delivery_count = static_cast<uint32_t>(*n);
    } else if (key == "expiry-policy") {
        static constexpr std::array<std::string_view, 2> allowed = {"drop", "dead-letter"};
        auto s = choice_of(v, allowed);
        if (!s) return s.error();
        p.expiry = *s == "drop" ? expiry_policy::drop : expiry_policy::dead_letter;
    } else if (key == "durable") {
        auto b = v.get_bool();
        if (!b) return b.error();
        p.durable = *b;
    } else {
        return unknown_key_message(key, policy_keys_);
    }
    return std::nullopt;
}

std::optional<std::string> check_queue_name(std::string_view name) { return wharf::check_queue_name(name); }

void policy_layer::apply_to(queue_policy& p) const {
    if (max_depth_messages) p.max_depth_messages = *max_depth_messages;
    if (max_depth_bytes) p.max_depth_bytes = *max_depth_bytes;
    if (overflow) p.overflow = *overflow;
    if (dead_letter_queue) p.dead_letter_queue = *dead_letter_queue;
    if (max_delivery_count) p.max_delivery_count = *max_delivery_count;
    if (expiry) p.expiry = *expiry;
    if (durable) p.durable = *durable;
}

} // namespace detail

result<listener_config, std::string> parse_listen(std::string_view s) {
    const std::string expected = "expected HOST:PORT (IPv6 as [::1]:5672)";
    std::string_view host, port;
    if (!s.empty() && s.front() == '[') {
        auto close = s.find(']');
        if (close == std::string_view::npos) return fail("missing ']': " + expected);
        host = s.substr(1, close - 1);
        auto rest = s.substr(close + 1);
        if (rest.empty() || rest.front() != ':') return fail(expected);
        port = rest.substr(1);
        if (host.empty()) return fail("missing host: " + expected);
    } else {
        auto colon = s.rfind(':');
        if (colon == std::string_view::npos) return fail(expected);
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
        if (host.empty())
            return fail("missing host: " + expected + "; use 0.0.0.0:PORT for all interfaces");
        if (host.find(':') != std::string_view::npos)
            return fail(std::string("an IPv6 address must be in brackets, e.g. [::1]:5672"));
    }
    for (unsigned char c : host) {
        if (c <= 0x20 || c == 0x7f || c == '[' || c == ']' || c == '/')
            return fail("bad character in host '" + std::string(host) + "'");
    }
    if (port.empty()) return fail("missing port: " + expected);
    uint32_t p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && p > 65535 &&
                                                 end == port.data() + port.size()))
        return fail("port " + std::string(port) + " is out of range 0-65535");
    if (ec != std::errc() || end != port.data() + port.size())
        return fail("port '" + std::string(port) + "' is not a number");
    listener_config l;
    l.host = std::string(host);
    l.port = static_cast<uint16_t>(p);
    return l;
}

} // namespace wharf::config
