#pragma once
// The queue settings management may change at run time (wharf.queue UPDATE
// and CREATE): limits, overflow and dead-lettering. Each is optional: unset
// means "as configured". `durable` is not among them: messages already
// stored were written under it.
//
// Pure; any thread. Shared by the broker (which applies settings to its
// queues) and plugins (the WLM plugin stores them cluster-wide).

#include "broker/common/limits.hpp"
#include "broker/common/names.hpp"
#include "plugins/api/plugin.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace wharf::plugins {

struct queue_settings {
    std::optional<uint64_t> max_depth;           // messages; 0 = unlimited
    std::optional<uint64_t> max_depth_bytes;     // 0 = unlimited
    std::optional<uint64_t> max_delivery_count;  // 0 = unlimited
    std::optional<std::string> overflow;         // "block" or "reject"
    std::optional<std::string> dead_letter_address; // "" = drop instead

    bool empty() const {
        return !max_depth && !max_depth_bytes && !max_delivery_count && !overflow && !dead_letter_address;
    }
    // Sets what `newer` sets.
    void merge(const queue_settings& newer) {
        if (newer.max_depth) max_depth = newer.max_depth;
        if (newer.max_depth_bytes) max_depth_bytes = newer.max_depth_bytes;
        if (newer.max_delivery_count) max_delivery_count = newer.max_delivery_count;
        if (newer.overflow) overflow = newer.overflow;
        if (newer.dead_letter_address) dead_letter_address = newer.dead_letter_address;
    }
};

// The management attribute names, in the order entities list them.
inline constexpr std::array<std::string_view, 5> queue_setting_names = {
    "maxDepth", "maxDepthBytes", "maxDeliveryCount", "overflow", "deadLetterAddress"};

// The settings among a request's arguments for `queue` (other keys are
// ignored; see unknown_setting). A setting of the wrong type or range is an
// invalid_field error naming it.
inline result<queue_settings, error> settings_from_args(const entity& args, std::string_view queue) {
    queue_settings s;
    struct counted {
        const char* key;
        std::optional<uint64_t>* into;
        int64_t max;
    };
    constexpr int64_t no_max = std::numeric_limits<int64_t>::max();
    for (auto [key, into, max] : {counted{"maxDepth", &s.max_depth, no_max},
                                  counted{"maxDepthBytes", &s.max_depth_bytes, no_max},
                                  // The engine counts deliveries in 32 bits.
                                  counted{"maxDeliveryCount", &s.max_delivery_count, std::numeric_limits<uint32_t>::max()}}) {
        auto it = args.find(key);
        if (it == args.end()) continue;
        auto* n = std::get_if<int64_t>(&it->second);
        if (n == nullptr || *n < 0)
            return fail(error{errc::invalid_field, std::string("'") + key + "' must be a whole number >= 0 (0 = unlimited)"});
        if (*n > max)
            return fail(error{errc::invalid_field, std::string("'") + key + "' is at most " + std::to_string(max) +
                                                       "; " + std::to_string(*n) + " is too large"});
        *into = static_cast<uint64_t>(*n);
    }
    if (auto it = args.find("overflow"); it != args.end()) {
        auto* o = std::get_if<std::string>(&it->second);
        if (o == nullptr || (*o != "block" && *o != "reject"))
            return fail(error{errc::invalid_field, "'overflow' must be \"block\" or \"reject\""});
        s.overflow = *o;
    }
    if (auto it = args.find("deadLetterAddress"); it != args.end()) {
        auto* d = std::get_if<std::string>(&it->second);
        if (d == nullptr)
            return fail(error{errc::invalid_field, "'deadLetterAddress' must be a queue name (a string; \"\" drops)"});
        if (!d->empty() && (*d)[0] == '$')
            return fail(error{errc::invalid_field, "'deadLetterAddress' must be a queue name, not '" + *d + "'"});
        if (*d == queue)
            return fail(error{errc::invalid_field, "'deadLetterAddress' must name another queue: '" + *d +
                                                       "' would dead-letter into itself"});
        if (d->size() > max_queue_name)
            return fail(error{errc::invalid_field, "'deadLetterAddress' is " + std::to_string(d->size()) +
                                                       " bytes long; a queue's name is at most " +
                                                       std::to_string(max_queue_name) + " bytes"});
        if (!d->empty())
            if (auto bad = check_queue_name(*d)) return fail(error{errc::invalid_field, "'deadLetterAddress': " + *bad});
        s.dead_letter_address = *d;
    }
    return s;
}

// The first argument that is neither one of `accepted` nor part of the
// management request itself (CREATE and UPDATE refuse it: a misspelt
// argument must not be answered "OK" while it changes nothing).
template <class Names> std::optional<std::string> unknown_argument(const entity& args, const Names& accepted) {
    static constexpr std::array<std::string_view, 10> request_keys = {
        "operation", "type", "name", "identity", "entityType", "wharf:scope", "locales", "offset", "count", "node"};
    auto known = [](const auto& names, const std::string& key) {
        for (const auto& n : names)
            if (n == key) return true;
        return false;
    };
    for (const auto& [key, value] : args) {
        (void)value;
        if (key.empty() || key[0] == '$') continue;
        if (!known(accepted, key) && !known(request_keys, key)) return key;
    }
    return std::nullopt;
}

// For CREATE and UPDATE of a queue (`op`): an argument that is not a
// setting, as an invalid_field error naming it and the settings.
inline std::optional<error> unknown_setting(const entity& args, std::string_view op = "UPDATE") {
    auto key = unknown_argument(args, queue_setting_names);
    if (!key) return std::nullopt;
    std::string names;
    for (auto n : queue_setting_names) names += (names.empty() ? "" : ", ") + std::string(n);
    return error{errc::invalid_field, "'" + *key + "' is not a setting " + std::string(op) + " can " +
                                          (op == "CREATE" ? "set" : "change") + " (settings: " + names + ")"};
}

// The settings that are set, as entity attributes.
inline void put_settings(entity& e, const queue_settings& s) {
    auto n = [](uint64_t v) { return attribute_value{static_cast<int64_t>(v)}; };
    if (s.max_depth) e["maxDepth"] = n(*s.max_depth);
    if (s.max_depth_bytes) e["maxDepthBytes"] = n(*s.max_depth_bytes);
    if (s.max_delivery_count) e["maxDeliveryCount"] = n(*s.max_delivery_count);
    if (s.overflow) e["overflow"] = *s.overflow;
    if (s.dead_letter_address) e["deadLetterAddress"] = *s.dead_letter_address;
}

} // namespace wharf::plugins
