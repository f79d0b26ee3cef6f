// Evaluating a parsed JMS selector against a message's bytes; see
// selector.hpp for the semantics and selector_parse.cpp for the grammar.

#include "broker/amqp/selector.hpp"

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/selector_node.hpp"
#include "broker/amqp/value_cursor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

namespace wharf::amqp {
namespace {

using node = selector::node;
using op = node::op;

uint64_t be(std::string_view b, size_t from, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[from + i]);
    return v;
}

// A variable-width value's bytes (binary, string, symbol), past its format
// code and its size: one byte of size for 0xa_, four for 0xb_.
std::string_view variable_body(std::string_view raw) {
    return raw.substr((static_cast<uint8_t>(raw[0]) & 0x10) != 0 ? 5 : 2);
}

// One whole encoded value (constructor included) as a selector sees it.
sel_value decode(std::string_view raw) {
    const auto code = static_cast<uint8_t>(raw[0]);
    switch (code) {
    case 0x41: return true;
    case 0x42: return false;
    case 0x56: return raw[1] != 0;
    case 0x43: case 0x44: return int64_t{0};
    case 0x50: case 0x52: case 0x53: return static_cast<int64_t>(be(raw, 1, 1));
    case 0x51: case 0x54: case 0x55: return static_cast<int64_t>(static_cast<int8_t>(be(raw, 1, 1)));
    case 0x60: return static_cast<int64_t>(be(raw, 1, 2));
    case 0x61: return static_cast<int64_t>(static_cast<int16_t>(be(raw, 1, 2)));
    case 0x70: return static_cast<int64_t>(be(raw, 1, 4));
    case 0x71: return static_cast<int64_t>(static_cast<int32_t>(be(raw, 1, 4)));
    case 0x80: {
        const uint64_t v = be(raw, 1, 8);
        if (v > static_cast<uint64_t>(INT64_MAX)) return static_cast<double>(v);
        return static_cast<int64_t>(v);
    }
    case 0x81: case 0x83: return static_cast<int64_t>(be(raw, 1, 8));
    case 0x72: {
        const auto bits = static_cast<uint32_t>(be(raw, 1, 4));
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return static_cast<double>(f);
    }
    case 0x82: {
        const uint64_t bits = be(raw, 1, 8);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return d;
    }
    case 0xa1: case 0xa3: case 0xb1: case 0xb3: return variable_body(raw);
    default: return {}; // null, or a type selectors do not compare
    }
}

// The message's fields, looked up by name as the selector asks for them.
class fields {
  public:
    // `names`: the application-properties the selector names, sorted; a
    // node's slot is its name's place there, and `values` (as many) is
    // filled by one walk over the message's map at the first name read.
    fields(std::string_view bytes, const section_spans& spans, message_state state,
           const std::vector<std::string>& names, sel_value* values, bool* found)
        : bytes_(bytes), spans_(spans), state_(state), names_(names), values_(values), found_(found) {}

    sel_value get(const node& n) const {
        switch (n.field) {
        case message_field::property: return property(n.slot);
        case message_field::priority: {
            const std::string_view p = header_field(1);
            return static_cast<int64_t>(p.size() == 2 && p[0] == '\x50' ? static_cast<uint8_t>(p[1]) : 4);
        }
        case message_field::delivery_mode: {
            const std::string_view d = header_field(0);
            const bool durable = d == "\x41" || (d.size() == 2 && d[0] == '\x56' && d[1] != 0);
            return std::string_view(durable ? "PERSISTENT" : "NON_PERSISTENT");
        }
        case message_field::timestamp: return property_field(9);
        case message_field::message_id: return string_only(property_field(0));
        case message_field::correlation_id: return string_only(property_field(5));
        case message_field::type: return string_only(property_field(3));
        case message_field::user_id: return binary_as_string(properties_raw(1));
        case message_field::group_id: return string_only(property_field(10));
        case message_field::group_seq: return property_field(11);
        case message_field::delivery_count: return static_cast<int64_t>(state_.delivery_count) + 1;
        case message_field::expiration: return state_.expiry_ms;
        }
        return {};
    }

  private:
    static sel_value string_only(sel_value v) { return std::holds_alternative<std::string_view>(v) ? v : sel_value{}; }

    // A section's value: past its 0x00 and descriptor. False when absent.
    bool open_section(size_t at, size_t end, value_cursor& c, size_t& value_end, uint32_t& count) const {
        if (end <= at) return false;
        c.take(at + 1);
        if (!c.jump_value(end, 1) || !c.need(1, end, "a section")) return false;
        const size_t v = c.pos();
        const uint8_t code = c.u8();
        if (code == 0x40 || code == 0x45) return false; // null, or an empty list
        return c.open_compound(code, v, end, value_end, count);
    }

    // Element `index` of the list section at [at, end), encoded; empty when
    // the list is shorter or the section absent.
    std::string_view list_field(size_t at, size_t end, uint32_t index) const {
        value_cursor c(bytes_);
        size_t list_end = 0;
        uint32_t count = 0;
        if (!open_section(at, end, c, list_end, count) || index >= count) return {};
        for (uint32_t i = 0; i < index; ++i)
            if (!c.jump_value(list_end, 1)) return {};
        const size_t from = c.pos();
        return c.jump_value(list_end, 1) ? c.since(from) : std::string_view{};
    }

    std::string_view header_field(uint32_t index) const {
        return list_field(spans_.header_at, spans_.header_end, index);
    }

    std::string_view properties_raw(uint32_t index) const {
        return list_field(spans_.properties_at, spans_.properties_end, index);
    }
    sel_value property_field(uint32_t index) const {
        const std::string_view raw = properties_raw(index);
        return raw.empty() ? sel_value{} : decode(raw);
    }
    // A binary's bytes as a string (user-id: Qpid JMS writes JMSXUserID's
    // UTF-8 there); NULL for anything else.
    static sel_value binary_as_string(std::string_view raw) {
        if (raw.empty()) return {};
        const auto code = static_cast<uint8_t>(raw[0]);
        return code == 0xa0 || code == 0xb0 ? sel_value{variable_body(raw)} : sel_value{};
    }

    // A string or symbol key's characters; nullopt for any other key.
    static std::optional<std::string_view> key_text(std::string_view raw) {
        switch (static_cast<uint8_t>(raw[0])) {
        case 0xa1: case 0xa3: case 0xb1: case 0xb3: return variable_body(raw);
        default: return std::nullopt;
        }
    }

    // The value of the property in `slot`. The application-properties are
    // walked once in all, and only as far as a name asked for needs: each
    // key passed on the way fills its own slot (at its first occurrence),
    // so a name used again, or found earlier on the way to another, costs
    // nothing more, and a name an OR never reaches is never looked for. A
    // walk per use made a message cost (uses) x (keys): seconds for a
    // selector of many ORs over a message of many properties.
    sel_value property(uint32_t slot) const {
        if (walk_ == walk::unopened) {
            walk_ = walk::done;
            uint32_t count = 0;
            if (open_section(spans_.application_properties_at, spans_.application_properties_end, walker_, map_end_,
                             count)) {
                pairs_left_ = count / 2;
                walk_ = walk::open;
            }
        }
        while (!found_[slot] && walk_ == walk::open) next_property();
        return values_[slot];
    }
    void next_property() const {
        const size_t key_at = walker_.pos();
        if (pairs_left_-- == 0 || !walker_.jump_value(map_end_, 1)) {
            walk_ = walk::done;
            return;
        }
        const auto key = key_text(walker_.since(key_at));
        const size_t value_at = walker_.pos();
        if (!walker_.jump_value(map_end_, 1)) {
            walk_ = walk::done;
            return;
        }
        if (!key) return;
        const size_t slot = slot_of(*key);
        if (slot == names_.size() || found_[slot]) return;
        found_[slot] = true;
        values_[slot] = decode(walker_.since(value_at));
    }

    // `key`'s place among names_, or names_.size(). A few names are
    // compared in turn (lengths first), more are searched.
    size_t slot_of(std::string_view key) const {
        if (names_.size() <= 8) {
            size_t i = 0;
            while (i < names_.size() && names_[i] != key) ++i;
            return i;
        }
        const auto at = std::lower_bound(names_.begin(), names_.end(), key,
                                         [](const std::string& a, std::string_view b) { return a < b; });
        return at != names_.end() && *at == key ? static_cast<size_t>(at - names_.begin()) : names_.size();
    }

    std::string_view bytes_;
    const section_spans& spans_;
    message_state state_;
    const std::vector<std::string>& names_;
    sel_value* values_;
    bool* found_;
    // The walk over the application-properties, as far as it has gone.
    enum class walk : uint8_t { unopened, open, done };
    mutable walk walk_ = walk::unopened;
    mutable value_cursor walker_{bytes_};
    mutable size_t map_end_ = 0;
    mutable uint32_t pairs_left_ = 0;
};

bool is_null(const sel_value& v) { return std::holds_alternative<std::monostate>(v); }
bool is_number(const sel_value& v) { return std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v); }
double as_double(const sel_value& v) {
    return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
}
// A condition's value: true, false, or unknown (anything but a boolean).
const bool* as_bool(const sel_value& v) { return std::get_if<bool>(&v); }

sel_value compare(op o, const sel_value& a, const sel_value& b) {
    if (is_null(a) || is_null(b)) return {};
    int order = 0; // a <=> b
    if (is_number(a) && is_number(b)) {
        if (std::holds_alternative<int64_t>(a) && std::holds_alternative<int64_t>(b)) {
            const int64_t x = std::get<int64_t>(a), y = std::get<int64_t>(b);
            order = x < y ? -1 : x > y ? 1 : 0;
        } else {
            const double x = as_double(a), y = as_double(b);
            if (std::isnan(x) || std::isnan(y)) return o == op::ne;
            order = x < y ? -1 : x > y ? 1 : 0;
        }
    } else if (a.index() == b.index() && (o == op::eq || o == op::ne)) {
        order = a == b ? 0 : 1; // strings and booleans: = and <> only
    } else {
        return false; // unlike types, or an order of strings or booleans
    }
    switch (o) {
    case op::eq: return order == 0;
    case op::ne: return order != 0;
    case op::lt: return order < 0;
    case op::gt: return order > 0;
    case op::le: return order <= 0;
    case op::ge: return order >= 0;
    default: return {};
    }
}

sel_value arithmetic(op o, const sel_value& a, const sel_value& b) {
    if (!is_number(a) || !is_number(b)) return {};
    if (std::holds_alternative<int64_t>(a) && std::holds_alternative<int64_t>(b)) {
        const int64_t x = std::get<int64_t>(a), y = std::get<int64_t>(b);
        int64_t r = 0;
        switch (o) {
        case op::add: if (!__builtin_add_overflow(x, y, &r)) return r; break;
        case op::sub: if (!__builtin_sub_overflow(x, y, &r)) return r; break;
        case op::mul: if (!__builtin_mul_overflow(x, y, &r)) return r; break;
        default: break; // a division is of reals
        }
    }
    // As ActiveMQ and Artemis evaluate selectors: a division is always of
    // reals (7 / 2 is 3.5), and by zero gives an infinity or NaN, as in Java.
    const double x = as_double(a), y = as_double(b);
    switch (o) {
    case op::add: return x + y;
    case op::sub: return x - y;
    case op::mul: return x * y;
    default:
        if (y != 0) return x / y;
        // What IEEE division gives, spelled out (dividing by zero is not defined in C++).
        if (x == 0 || std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
        return (x > 0) == !std::signbit(y) ? std::numeric_limits<double>::infinity()
                                           : -std::numeric_limits<double>::infinity();
    }
}

// Three-valued OR and AND of two conditions (anything but a boolean is unknown).
sel_value either(const sel_value& a, const sel_value& b) {
    const bool *x = as_bool(a), *y = as_bool(b);
    if ((x && *x) || (y && *y)) return true;
    return x && y ? sel_value{false} : sel_value{};
}
sel_value both(const sel_value& a, const sel_value& b) {
    const bool *x = as_bool(a), *y = as_bool(b);
    if ((x && !*x) || (y && !*y)) return false;
    return x && y ? sel_value{true} : sel_value{};
}

sel_value eval(const node& n, const fields& f) {
    auto kid = [&](size_t i) { return eval(*n.kids[i], f); };
    auto negate = [&](sel_value v) -> sel_value {
        const bool* b = as_bool(v);
        return b == nullptr ? sel_value{} : sel_value{!*b};
    };
    switch (n.o) {
    case op::literal: return n.value;
    case op::identifier: return f.get(n);
    case op::or_: {
        const sel_value a = kid(0);
        if (const bool* x = as_bool(a); x && *x) return true;
        return either(a, kid(1));
    }
    case op::and_: {
        const sel_value a = kid(0);
        if (const bool* x = as_bool(a); x && !*x) return false;
        return both(a, kid(1));
    }
    case op::not_: return negate(kid(0));
    case op::eq: case op::ne: case op::lt: case op::gt: case op::le: case op::ge:
        return compare(n.o, kid(0), kid(1));
    case op::add: case op::sub: case op::mul: case op::div: return arithmetic(n.o, kid(0), kid(1));
    case op::neg: {
        const sel_value v = kid(0);
        if (const auto* i = std::get_if<int64_t>(&v)) return *i == INT64_MIN ? sel_value{-static_cast<double>(*i)} : sel_value{-*i};
        if (const auto* d = std::get_if<double>(&v)) return -*d;
        return {};
    }
    case op::between: {
        // x BETWEEN a AND b is a <= x AND x <= b; x NOT BETWEEN a AND b is
        // x < a OR x > b (JMS 2.0 §3.8.1.2), so neither holds for a value of
        // another type or NaN.
        const sel_value v = kid(0);
        if (n.negated) return either(compare(op::lt, v, kid(1)), compare(op::gt, v, kid(2)));
        return both(compare(op::ge, v, kid(1)), compare(op::le, v, kid(2)));
    }
    case op::in: {
        const sel_value v = kid(0);
        if (is_null(v)) return {};
        // A value that is not a string is unknown here, as ActiveMQ has it:
        // neither IN nor NOT IN (nor NOT of either) selects it.
        const auto* s = std::get_if<std::string_view>(&v);
        if (s == nullptr) return {};
        bool found = false;
        for (const auto& m : n.set) found = found || *s == m;
        return found != n.negated;
    }
    case op::like: {
        const sel_value v = kid(0);
        if (is_null(v)) return {};
        const auto* s = std::get_if<std::string_view>(&v);
        if (s == nullptr) return false;
        return like_matches(code_points(*s), n.like) != n.negated;
    }
    case op::is_null: return is_null(kid(0)) != n.negated;
    }
    return {};
}

} // namespace

std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const size_t n = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = n != 0 && i + n <= s.size();
        for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (!ok) {
            out.push_back(b);
            ++i;
            continue;
        }
        uint32_t cp = n == 1 ? b : b & (0xff >> (n + 1));
        for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
        out.push_back(cp);
        i += n;
    }
    return out;
}

like_pattern compile_like(std::string_view text, int escape) {
    like_pattern p;
    p.parts.emplace_back();
    const auto cps = code_points(text);
    // The escape character escapes only _, % and itself (as ActiveMQ's
    // LikeExpression reads it); before anything else it is what it would be
    // without ESCAPE.
    const auto escapes = [&](size_t i) {
        const uint32_t next = cps[i + 1];
        return next == '_' || next == '%' || next == static_cast<uint32_t>(escape);
    };
    for (size_t i = 0; i < cps.size(); ++i) {
        if (escape >= 0 && cps[i] == static_cast<uint32_t>(escape) && i + 1 < cps.size() && escapes(i)) {
            p.parts.back().push_back(cps[++i]);
        } else if (cps[i] == '%') {
            p.parts.emplace_back();
        } else {
            p.parts.back().push_back(cps[i] == '_' ? like_any : cps[i]);
        }
    }
    return p;
}

namespace {
bool part_at(const std::vector<uint32_t>& v, size_t at, const std::vector<uint32_t>& part) {
    if (at + part.size() > v.size()) return false;
    for (size_t i = 0; i < part.size(); ++i)
        if (part[i] != like_any && part[i] != v[at + i]) return false;
    return true;
}

// Where `part` (at most 64 code points) first ends in v[from, to), plus one;
// 0 when it does not occur. Shift-and: one pass over the value.
size_t find_part(const std::vector<uint32_t>& v, size_t from, size_t to, const std::vector<uint32_t>& part) {
    const size_t m = part.size();
    uint64_t any = 0;
    for (size_t i = 0; i < m; ++i)
        if (part[i] == like_any) any |= uint64_t{1} << i;
    uint64_t state = 0;
    for (size_t j = from; j < to; ++j) {
        uint64_t fits = any;
        for (size_t i = 0; i < m; ++i)
            if (part[i] == v[j]) fits |= uint64_t{1} << i;
        state = ((state << 1) | 1) & fits;
        if (state & (uint64_t{1} << (m - 1))) return j + 1;
    }
    return 0;
}
} // namespace

// Leftmost-first: each middle part is taken where it first occurs, which
// leaves the most room for the rest, so one pass decides.
bool like_matches(const std::vector<uint32_t>& v, const like_pattern& p) {
    const auto& first = p.parts.front();
    if (p.parts.size() == 1) return v.size() == first.size() && part_at(v, 0, first);
    const auto& last = p.parts.back();
    if (first.size() + last.size() > v.size() || !part_at(v, 0, first) || !part_at(v, v.size() - last.size(), last))
        return false;
    size_t pos = first.size();
    const size_t end = v.size() - last.size();
    for (size_t i = 1; i + 1 < p.parts.size(); ++i) {
        const auto& part = p.parts[i];
        if (part.empty()) continue;
        const size_t found = find_part(v, pos, end, part);
        if (found == 0) return false;
        pos = found;
    }
    return true;
}

namespace {
// The tree's application-property names, sorted and once each, and each
// identifier node's slot among them.
std::vector<std::string> property_slots(node& root) {
    std::vector<node*> ids;
    std::vector<node*> todo{&root};
    while (!todo.empty()) {
        node* n = todo.back();
        todo.pop_back();
        if (n->o == op::identifier && n->field == message_field::property) ids.push_back(n);
        for (auto& k : n->kids) todo.push_back(k.get());
    }
    std::vector<std::string> names;
    for (const node* n : ids) names.push_back(n->name);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (node* n : ids)
        n->slot = static_cast<uint32_t>(std::lower_bound(names.begin(), names.end(), n->name) - names.begin());
    return names;
}
} // namespace

selector::selector(std::unique_ptr<node> root) : root_(std::move(root)), names_(property_slots(*root_)) {}
selector::~selector() = default;

result<std::shared_ptr<const selector>, std::string> selector::parse(std::string_view text) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::shared_ptr<const selector>();
    auto root = parse_selector(text);
    if (!root) return fail(root.error());
    return std::shared_ptr<const selector>(new selector(std::move(root.value())));
}

bool selector::matches(std::string_view bytes, message_state state) const {
    const auto spans = locate_sections(bytes);
    if (!spans) return false;
    // The slots of up to eight property names live here; more take the heap.
    constexpr size_t inline_slots = 8;
    std::array<sel_value, inline_slots> small_values{};
    std::array<bool, inline_slots> small_found{};
    std::unique_ptr<sel_value[]> large_values;
    std::unique_ptr<bool[]> large_found;
    sel_value* values = small_values.data();
    bool* found = small_found.data();
    if (names_.size() > inline_slots) {
        large_values = std::make_unique<sel_value[]>(names_.size());
        large_found = std::make_unique<bool[]>(names_.size());
        values = large_values.get();
        found = large_found.get();
    }
    const fields f(bytes, *spans, state, names_, values, found);
    const sel_value v = eval(*root_, f);
    const bool* b = as_bool(v);
    return b != nullptr && *b;
}

} // namespace wharf::amqp
