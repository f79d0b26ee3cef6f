#pragma once
// datum: an AMQP value as a plain tree (null, bool, integers, double,
// string, list, map with keys in the order they came), so that management
// replies can be printed as JSON or as table cells without Proton types.
// Also the reverse for what the user types: `k=v` arguments become values.
//
// Pure; any thread.

#include <proton/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace wharf::mgmt {

struct datum {
    using list = std::vector<datum>;
    using map = std::vector<std::pair<std::string, datum>>;
    std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, list, map> v;

    bool is_null() const { return std::holds_alternative<std::monostate>(v); }
    const std::string* as_string() const { return std::get_if<std::string>(&v); }
    const list* as_list() const { return std::get_if<list>(&v); }
    const map* as_map() const { return std::get_if<map>(&v); }
    std::optional<int64_t> as_int() const;
    // The entry `key` of a map; nullptr if this is no map or has no such key.
    const datum* find(const std::string& key) const;
};

// Any AMQP value: symbols, binaries, uuids, timestamps and other exotic
// scalars become strings (timestamps: milliseconds); map keys become strings.
datum from_amqp(const proton::value& v);

// JSON text (one line, or indented by two spaces per level with `pretty`).
std::string to_json(const datum& d, bool pretty = false);

// A table cell: strings as they are, null as "-", lists joined by ",",
// maps as JSON.
std::string to_cell(const datum& d);

// Parses one `key=value` argument: true/false become booleans, null a null,
// decimal integers longs, "quoted" text a string without the quotes,
// anything else a string. nullopt when there is no '=' or no key.
std::optional<std::pair<std::string, proton::value>> parse_argument(const std::string& arg);

} // namespace wharf::mgmt
