#include "client/management/datum.hpp"

#include <nlohmann/json.hpp>

#include <proton/binary.hpp>
#include <proton/codec/vector.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/timestamp.hpp>
#include <proton/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace wharf::mgmt {

std::optional<int64_t> datum::as_int() const {
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* u = std::get_if<uint64_t>(&v)) return static_cast<int64_t>(*u);
    return std::nullopt;
}

const datum* datum::find(const std::string& key) const {
    const map* m = as_map();
    if (m == nullptr) return nullptr;
    for (const auto& [k, val] : *m)
        if (k == key) return &val;
    return nullptr;
}

namespace {

std::string hex(const proton::binary& b) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (uint8_t c : b) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

std::string key_text(const proton::value& k) {
    switch (k.type()) {
    case proton::STRING: return proton::get<std::string>(k);
    case proton::SYMBOL: return proton::get<proton::symbol>(k);
    default: return to_cell(from_amqp(k));
    }
}

// nlohmann::json escapes the text (bytes that are not UTF-8 become U+FFFD,
// so the output is always valid JSON).
void json_string(std::string& out, const std::string& s) {
    out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string number(double d) {
    if (!std::isfinite(d)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
}

void json(std::string& out, const datum& d, bool pretty, int depth) {
    const std::string pad = pretty ? "\n" + std::string(2 * (depth + 1), ' ') : "";
    const std::string end_pad = pretty ? "\n" + std::string(2 * depth, ' ') : "";
    const char* sep = pretty ? ": " : ":";
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>) out += "null";
            else if constexpr (std::is_same_v<T, bool>) out += x ? "true" : "false";
            else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) out += std::to_string(x);
            else if constexpr (std::is_same_v<T, double>) out += number(x);
            else if constexpr (std::is_same_v<T, std::string>) json_string(out, x);
            else if constexpr (std::is_same_v<T, datum::list>) {
                // In pretty mode a list of scalars (a QUERY row) stays on one line.
                const bool flat = std::none_of(x.begin(), x.end(), [](const datum& e) {
                    return e.as_list() != nullptr || e.as_map() != nullptr;
                });
                out += '[';
                for (size_t i = 0; i < x.size(); ++i) {
                    out += (i ? (flat && pretty ? ", " : ",") : "") + (flat ? "" : pad);
                    json(out, x[i], pretty, depth + 1);
                }
                out += (x.empty() || flat ? "" : end_pad) + "]";
            } else {
                out += '{';
                for (size_t i = 0; i < x.size(); ++i) {
                    out += (i ? "," : "") + pad;
                    json_string(out, x[i].first);
                    out += sep;
                    json(out, x[i].second, pretty, depth + 1);
                }
                out += (x.empty() ? "" : end_pad) + "}";
            }
        },
        d.v);
}

} // namespace

datum from_amqp(const proton::value& v) {
    using namespace proton;
    switch (v.type()) {
    case NULL_TYPE: return {};
    case BOOLEAN: return {get<bool>(v)};
    case UBYTE:
    case USHORT:
    case UINT:
    case ULONG: return {coerce<uint64_t>(v)};
    case BYTE:
    case SHORT:
    case INT:
    case LONG: return {coerce<int64_t>(v)};
    case FLOAT:
    case DOUBLE: return {coerce<double>(v)};
    case TIMESTAMP: return {int64_t{get<timestamp>(v).milliseconds()}};
    case STRING: return {get<std::string>(v)};
    case SYMBOL: return {std::string(get<symbol>(v))};
    case BINARY: return {hex(get<binary>(v))};
    case LIST:
    case ARRAY: {
        datum::list out;
        for (const auto& x : get<std::vector<value>>(v)) out.push_back(from_amqp(x));
        return {std::move(out)};
    }
    case MAP: {
        datum::map out;
        for (const auto& [k, x] : get<std::vector<std::pair<value, value>>>(v)) out.emplace_back(key_text(k), from_amqp(x));
        return {std::move(out)};
    }
    default: return {to_string(v)}; // char, decimals, uuid, described
    }
}

std::string to_json(const datum& d, bool pretty) {
    std::string out;
    json(out, d, pretty, 0);
    return out;
}

std::string to_cell(const datum& d) {
    if (d.is_null()) return "-";
    if (auto* s = d.as_string()) return *s;
    if (auto* l = d.as_list()) {
        std::string out;
        for (const auto& x : *l) out += (out.empty() ? "" : ",") + to_cell(x);
        return out;
    }
    return to_json(d);
}

std::optional<std::pair<std::string, proton::value>> parse_argument(const std::string& arg) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    std::string key = arg.substr(0, eq);
    const std::string text = arg.substr(eq + 1);
    proton::value v;
    if (text == "true" || text == "false") v = text == "true";
    else if (text == "null") v = proton::null();
    else if (text.size() >= 2 && text.front() == '"' && text.back() == '"') v = text.substr(1, text.size() - 2);
    else {
        size_t used = 0;
        bool integer = !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos;
        int64_t n = 0;
        if (integer) {
            try {
                n = std::stoll(text, &used);
            } catch (const std::exception&) {
                integer = false;
            }
        }
        if (integer && used == text.size()) v = n;
        else v = text;
    }
    return std::make_pair(std::move(key), std::move(v));
}

} // namespace wharf::mgmt
