// parse_wlm_options and the serving mode: the [plugin.wlm] keys, checked
// once at start; errors name the key.

#include "wlm/core/wlm_service.hpp"

#include "broker/common/names.hpp"

#include <charconv>
#include <cmath>

namespace wharf::wlm {

namespace {
// A duration key's value: a number of seconds, positive and at most
// max_duration_seconds (so that it is finite and fits in milliseconds).
result<double, std::string> seconds_of(const std::string& key, const std::vector<std::string>& v) {
    double d = 0;
    auto [p, ec] = std::from_chars(v[0].data(), v[0].data() + v[0].size(), d);
    if (ec != std::errc() || p != v[0].data() + v[0].size() || !(d > 0))
        return fail("plugin.wlm." + key + ": '" + v[0] + "' is not a positive number of seconds");
    if (!std::isfinite(d) || d > static_cast<double>(max_duration_seconds))
        return fail("plugin.wlm." + key + ": '" + v[0] + "' seconds is more than a year (at most " +
                    std::to_string(max_duration_seconds) + ")");
    return d;
}

result<wlm_options::serve_mode, std::string> parse_mode(const std::string& v) {
    if (v == "relay") return wlm_options::serve_mode::relay;
    if (v == "redirect") return wlm_options::serve_mode::redirect;
    return fail("'" + v + "' is not a mode (relay or redirect)");
}

// The placement weight a key sets ("weight-messages"), or nullptr.
double* weight_of(placement_weights& w, const std::string& key) {
    if (key == "weight-queues") return &w.queues;
    if (key == "weight-messages") return &w.messages;
    if (key == "weight-message-rate") return &w.message_rate;
    if (key == "weight-connections") return &w.connections;
    return nullptr;
}

std::string trim(std::string s) {
    const size_t b = s.find_first_not_of(" \t");
    const size_t e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
} // namespace

std::string seconds_text(std::chrono::milliseconds d) {
    const int64_t ms = d.count();
    std::string out = std::to_string(ms / 1000);
    if (int64_t frac = ms % 1000; frac != 0) {
        std::string f = std::to_string(frac);
        f.insert(0, 3 - f.size(), '0');
        while (f.back() == '0') f.pop_back();
        out += "." + f;
    }
    return out;
}

wlm_options::serve_mode wlm_options::mode_for(std::string_view queue) const {
    for (const auto& [pattern, m] : mode_rules)
        if (glob_match(pattern, queue)) return m;
    return mode;
}

result<wlm_options, std::string> parse_wlm_options(const plugins::options& opts) {
    wlm_options o;
    for (const auto& [key, values] : opts) {
        if (values.empty()) return fail("plugin.wlm." + key + ": no value");
        if (key == "placement") {
            auto p = parse_policy_kind(values[0]);
            if (!p) return fail("plugin.wlm.placement: " + p.error());
            o.policy = *p;
        } else if (key == "rules") {
            auto r = parse_placement_rules(values);
            if (!r) return fail("plugin.wlm.rules: " + r.error());
            o.rules = std::move(*r);
        } else if (key == "lease-ttl") {
            auto s = seconds_of(key, values);
            if (!s) return fail(s.error());
            o.lease_ttl = std::chrono::milliseconds(static_cast<int64_t>(*s * 1000));
            if (o.lease_ttl < std::chrono::milliseconds(500))
                return fail(std::string("plugin.wlm.lease-ttl: at least 0.5 seconds"));
        } else if (key == "poll-interval") {
            auto s = seconds_of(key, values);
            if (!s) return fail(s.error());
            o.poll = std::chrono::milliseconds(std::max<int64_t>(10, static_cast<int64_t>(*s * 1000)));
        } else if (auto* w = weight_of(o.weights, key)) {
            auto v = parse_weight(values[0]);
            if (!v) return fail("plugin.wlm." + key + ": " + v.error());
            *w = *v;
        } else if (key == "groups") {
            // They go into this node's record in the metadata store.
            for (const auto& g : values)
                if (auto why = check_group_name(g)) return fail("plugin.wlm.groups: " + *why);
            o.groups = values;
        } else if (key == "reassign-after") {
            auto s = seconds_of(key, values);
            if (!s) return fail(s.error());
            o.reassign_after = std::chrono::milliseconds(static_cast<int64_t>(*s * 1000));
        } else if (key == "park-timeout") {
            auto s = seconds_of(key, values);
            if (!s) return fail(s.error());
            o.park_timeout = std::chrono::milliseconds(static_cast<int64_t>(*s * 1000));
        } else if (key == "mode") {
            auto m = parse_mode(values[0]);
            if (!m) return fail("plugin.wlm.mode: " + m.error());
            o.mode = *m;
        } else if (key == "mode-rules") {
            for (const auto& v : values) {
                const size_t arrow = v.find("->");
                auto m = arrow == std::string::npos ? parse_mode("") : parse_mode(trim(v.substr(arrow + 2)));
                const std::string pattern = arrow == std::string::npos ? "" : trim(v.substr(0, arrow));
                if (pattern.empty() || !m)
                    return fail("plugin.wlm.mode-rules: '" + v + "' is not \"PATTERN -> relay|redirect\"");
                o.mode_rules.emplace_back(pattern, *m);
            }
        } else {
            return fail("plugin.wlm." + key +
                        ": unknown key (known: placement, rules, lease-ttl, poll-interval, groups, "
                        "reassign-after, park-timeout, mode, mode-rules, weight-queues, weight-messages, "
                        "weight-message-rate, weight-connections)");
        }
    }
    return o;
}


} // namespace wharf::wlm
