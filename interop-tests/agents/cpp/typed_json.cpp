// Typed JSON <-> Proton C++ (see typed_json.hpp and ../CONTRACT.md).
#include "typed_json.hpp"

#include <proton/binary.hpp>
#include <proton/codec/decoder.hpp>
#include <proton/codec/encoder.hpp>
#include <proton/decimal.hpp>
#include <proton/message_id.hpp>
#include <proton/null.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/timestamp.hpp>
#include <proton/types.hpp>
#include <proton/uuid.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace wharf::interop {
namespace {

using proton::codec::decoder;
using proton::codec::encoder;
using proton::codec::finish;
using proton::codec::start;

const std::pair<const char*, proton::type_id> type_names[] = {
    {"null", proton::NULL_TYPE},       {"boolean", proton::BOOLEAN},     {"ubyte", proton::UBYTE},
    {"ushort", proton::USHORT},        {"uint", proton::UINT},           {"ulong", proton::ULONG},
    {"byte", proton::BYTE},            {"short", proton::SHORT},         {"int", proton::INT},
    {"long", proton::LONG},            {"float", proton::FLOAT},         {"double", proton::DOUBLE},
    {"decimal32", proton::DECIMAL32},  {"decimal64", proton::DECIMAL64}, {"decimal128", proton::DECIMAL128},
    {"char", proton::CHAR},            {"timestamp", proton::TIMESTAMP}, {"uuid", proton::UUID},
    {"binary", proton::BINARY},        {"string", proton::STRING},       {"symbol", proton::SYMBOL},
    {"list", proton::LIST},            {"map", proton::MAP},             {"array", proton::ARRAY},
};

std::string name_of(proton::type_id t) {
    for (const auto& [name, id] : type_names)
        if (id == t) return name;
    throw std::runtime_error("no typed form for AMQP type " + proton::type_name(t));
}

proton::type_id type_of(const json& name) {
    if (!name.is_string()) throw std::invalid_argument("a type name must be a string: " + name.dump());
    for (const auto& [n, id] : type_names)
        if (name.get<std::string>() == n) return id;
    throw std::invalid_argument("unknown type " + name.get<std::string>());
}

// ---- bytes, hex, UTF-8 ---------------------------------------------------------------

std::string hex(const uint8_t* p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string out(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 0xf];
    }
    return out;
}

std::string hex(const std::string& s) { return hex(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::vector<uint8_t> unhex(const json& v) {
    if (!v.is_string()) throw std::invalid_argument("hex must be a string: " + v.dump());
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() % 2) throw std::invalid_argument("odd-length hex: " + s);
    std::vector<uint8_t> out(s.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
        auto [end, ec] = std::from_chars(s.data() + 2 * i, s.data() + 2 * i + 2, out[i], 16);
        if (ec != std::errc() || end != s.data() + 2 * i + 2) throw std::invalid_argument("bad hex: " + s);
    }
    return out;
}

std::string utf8(uint32_t cp) {
    if (cp < 0x80) return std::string(1, char(cp));
    int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;  // bytes
    std::string s(size_t(n), '\0');
    for (int i = n - 1; i > 0; --i, cp >>= 6) s[size_t(i)] = char(0x80 | (cp & 0x3f));
    s[0] = char(((0xf00 >> n) & 0xf0) | cp);  // 0xc0, 0xe0 or 0xf0 and the top bits
    return s;
}

// The one code point of a UTF-8 string.
uint32_t code_point(const json& v) {
    if (!v.is_string()) throw std::invalid_argument("a char must be a string: " + v.dump());
    const auto& s = v.get_ref<const std::string&>();
    auto b = [&](size_t i) { return uint32_t(uint8_t(s[i])); };
    size_t n = s.empty() ? 0 : b(0) < 0x80 ? 1 : b(0) >= 0xf0 ? 4 : b(0) >= 0xe0 ? 3 : b(0) >= 0xc0 ? 2 : 0;
    if (n == 0 || s.size() != n) throw std::invalid_argument("a char must be one code point: " + v.dump());
    if (n == 1) return b(0);
    uint32_t cp = b(0) & (0x7f >> n);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (b(i) & 0x3f);
    return cp;
}

std::string uuid_str(const proton::uuid& u) {
    std::string h = hex(u.begin(), u.size());
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

proton::uuid uuid_of(const json& v) {
    if (!v.is_string()) throw std::invalid_argument("a uuid must be a string: " + v.dump());
    std::string s = v.get<std::string>();
    if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
        throw std::invalid_argument("not a canonical uuid: " + s);
    std::string digits;
    for (char c : s)
        if (c != '-') digits += c;
    auto bytes = unhex(json(digits));
    proton::uuid u;
    std::copy(bytes.begin(), bytes.end(), u.begin());
    return u;
}

// ---- numbers -------------------------------------------------------------------------

template <class T>
T int_of(const json& v) {
    if (v.is_number_unsigned()) {
        auto x = v.get<uint64_t>();
        if (std::in_range<T>(x)) return T(x);
    } else if (v.is_number_integer()) {
        auto x = v.get<int64_t>();
        if (std::in_range<T>(x)) return T(x);
    }
    throw std::invalid_argument("not a " + std::to_string(sizeof(T) * 8) + "-bit integer: " + v.dump());
}

// ulong, long, timestamp: a decimal string (or a JSON integer).
template <class T>
T wide_of(const json& v) {
    if (!v.is_string()) return int_of<T>(v);
    const auto& s = v.get_ref<const std::string&>();
    T x{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        throw std::invalid_argument("not a decimal integer: " + s);
    return x;
}

double double_of(const json& v) {
    if (!v.is_number()) throw std::invalid_argument("not a number: " + v.dump());
    return v.get<double>();
}

// decimal32 and decimal64: Proton C++ holds the bytes of the host-order
// integer (pn_decimal32_t / pn_decimal64_t) and the wire carries that integer
// big-endian, so the hex is the integer's. decimal128 is bytes on the wire.
template <class D, class U>
std::string decimal_hex(const D& d) {
    U x;
    std::memcpy(&x, d.begin(), sizeof x);
    uint8_t be[sizeof x];
    for (size_t i = 0; i < sizeof x; ++i) be[i] = uint8_t(x >> (8 * (sizeof x - 1 - i)));
    return hex(be, sizeof x);
}

template <class D, class U>
D decimal_of(const json& v) {
    auto bytes = unhex(v);
    if (bytes.size() != sizeof(U)) throw std::invalid_argument("decimal of the wrong size: " + v.dump());
    U x = 0;
    for (uint8_t b : bytes) x = U(x << 8) | b;
    D d;
    std::memcpy(d.begin(), &x, sizeof x);
    return d;
}

// ---- decoding ------------------------------------------------------------------------

template <class T>
T read(decoder& d) {
    T x;
    d >> x;
    return x;
}

json bare(decoder& d, proton::type_id t);

json typed(decoder& d) {
    proton::type_id t = d.next_type();
    json out = json::object();
    out["type"] = name_of(t);
    out["value"] = bare(d, t);
    return out;
}

// The next value, known to be of type t, in its bare JSON form.
json bare(decoder& d, proton::type_id t) {
    switch (t) {
    case proton::NULL_TYPE: {
        proton::scalar n;  // (decoder >> proton::null does not move past the null in 0.37)
        d >> n;
        return nullptr;
    }
    case proton::BOOLEAN: return read<bool>(d);
    case proton::UBYTE: return read<uint8_t>(d);
    case proton::USHORT: return read<uint16_t>(d);
    case proton::UINT: return read<uint32_t>(d);
    case proton::ULONG: return std::to_string(read<uint64_t>(d));
    case proton::BYTE: return read<int8_t>(d);
    case proton::SHORT: return read<int16_t>(d);
    case proton::INT: return read<int32_t>(d);
    case proton::LONG: return std::to_string(read<int64_t>(d));
    case proton::FLOAT: return double(read<float>(d));
    case proton::DOUBLE: return read<double>(d);
    case proton::DECIMAL32: return decimal_hex<proton::decimal32, uint32_t>(read<proton::decimal32>(d));
    case proton::DECIMAL64: return decimal_hex<proton::decimal64, uint64_t>(read<proton::decimal64>(d));
    case proton::DECIMAL128: {
        auto x = read<proton::decimal128>(d);
        return hex(x.begin(), x.size());
    }
    case proton::CHAR: return utf8(uint32_t(read<wchar_t>(d)));
    case proton::TIMESTAMP: return std::to_string(read<proton::timestamp>(d).milliseconds());
    case proton::UUID: return uuid_str(read<proton::uuid>(d));
    case proton::BINARY: {
        auto x = read<proton::binary>(d);
        return hex(x.data(), x.size());
    }
    case proton::STRING: return read<std::string>(d);
    case proton::SYMBOL: return std::string(read<proton::symbol>(d));
    case proton::LIST: {
        start s;
        d >> s;
        json out = json::array();
        for (size_t i = 0; i < s.size; ++i) out.push_back(typed(d));
        d >> finish();
        return out;
    }
    case proton::MAP: {
        start s;
        d >> s;  // s.size counts keys and values
        json out = json::array();
        for (size_t i = 0; i < s.size / 2; ++i) {
            json k = typed(d);
            out.push_back(json::array({k, typed(d)}));
        }
        d >> finish();
        return out;
    }
    case proton::ARRAY: {
        start s;
        d >> s;
        if (s.is_described) throw std::runtime_error("no typed form for a described array");
        json values = json::array();
        for (size_t i = 0; i < s.size; ++i) values.push_back(bare(d, s.element));
        d >> finish();
        json out = json::object();
        out["element"] = name_of(s.element);
        out["values"] = values;
        return out;
    }
    default: throw std::runtime_error("no typed form for AMQP type " + proton::type_name(t));
    }
}

// ---- encoding ------------------------------------------------------------------------

void put_bare(encoder& e, proton::type_id t, const json& v);

void put(encoder& e, const json& t) {
    if (!t.is_object() || !t.contains("type")) throw std::invalid_argument("not a typed value: " + t.dump());
    put_bare(e, type_of(t["type"]), t.contains("value") ? t["value"] : json());
}

const json& list_of(const json& v) {
    if (!v.is_array()) throw std::invalid_argument("not a JSON list: " + v.dump());
    return v;
}

void put_bare(encoder& e, proton::type_id t, const json& v) {
    switch (t) {
    case proton::NULL_TYPE: e << proton::null(); break;
    case proton::BOOLEAN:
        if (!v.is_boolean()) throw std::invalid_argument("not a boolean: " + v.dump());
        e << v.get<bool>();
        break;
    case proton::UBYTE: e << int_of<uint8_t>(v); break;
    case proton::USHORT: e << int_of<uint16_t>(v); break;
    case proton::UINT: e << int_of<uint32_t>(v); break;
    case proton::ULONG: e << wide_of<uint64_t>(v); break;
    case proton::BYTE: e << int_of<int8_t>(v); break;
    case proton::SHORT: e << int_of<int16_t>(v); break;
    case proton::INT: e << int_of<int32_t>(v); break;
    case proton::LONG: e << wide_of<int64_t>(v); break;
    case proton::FLOAT: e << float(double_of(v)); break;
    case proton::DOUBLE: e << double_of(v); break;
    case proton::DECIMAL32: e << decimal_of<proton::decimal32, uint32_t>(v); break;
    case proton::DECIMAL64: e << decimal_of<proton::decimal64, uint64_t>(v); break;
    case proton::DECIMAL128: {
        auto bytes = unhex(v);
        if (bytes.size() != 16) throw std::invalid_argument("decimal128 is 16 bytes: " + v.dump());
        proton::decimal128 d;
        std::copy(bytes.begin(), bytes.end(), d.begin());
        e << d;
        break;
    }
    case proton::CHAR: e << wchar_t(code_point(v)); break;
    case proton::TIMESTAMP: e << proton::timestamp(wide_of<int64_t>(v)); break;
    case proton::UUID: e << uuid_of(v); break;
    case proton::BINARY: {
        auto bytes = unhex(v);
        e << proton::binary(bytes.begin(), bytes.end());
        break;
    }
    case proton::STRING:
    case proton::SYMBOL:
        if (!v.is_string()) throw std::invalid_argument("not a string: " + v.dump());
        if (t == proton::STRING)
            e << v.get<std::string>();
        else
            e << proton::symbol(v.get<std::string>());
        break;
    case proton::LIST:
        e << start::list();
        for (const auto& x : list_of(v)) put(e, x);
        e << finish();
        break;
    case proton::MAP:
        e << start::map();
        for (const auto& kv : list_of(v)) {
            if (!kv.is_array() || kv.size() != 2) throw std::invalid_argument("not a [key, value] pair: " + kv.dump());
            put(e, kv[0]);
            put(e, kv[1]);
        }
        e << finish();
        break;
    case proton::ARRAY: {
        if (!v.is_object() || !v.contains("element") || !v.contains("values"))
            throw std::invalid_argument("an array is {element, values}: " + v.dump());
        proton::type_id element = type_of(v["element"]);
        e << start::array(element);
        for (const auto& x : list_of(v["values"])) put_bare(e, element, x);
        e << finish();
        break;
    }
    default: throw std::invalid_argument("cannot encode type " + proton::type_name(t));
    }
}

proton::value scalar_value(const proton::scalar_base& s) {
    proton::value v;
    encoder e(v);
    e << s;
    return v;
}

proton::message_id message_id_of(const json& t) {
    proton::value v = from_typed(t);
    switch (v.type()) {
    case proton::ULONG: return proton::get<uint64_t>(v);
    case proton::UUID: return proton::get<proton::uuid>(v);
    case proton::BINARY: return proton::get<proton::binary>(v);
    case proton::STRING: return proton::get<std::string>(v);
    default:
        throw unsupported("Proton C++ message ids are ulong, uuid, binary or string, not " +
                          proton::type_name(v.type()));
    }
}

std::string string_of(const json& v) {
    if (!v.is_string()) throw std::invalid_argument("not a string: " + v.dump());
    return v.get<std::string>();
}

} // namespace

json to_typed(const proton::value& v) {
    if (v.empty()) return json{{"type", "null"}, {"value", nullptr}};
    decoder d(v, true);
    return typed(d);
}

proton::value from_typed(const json& t) {
    proton::value v;
    encoder e(v);
    put(e, t);
    return v;
}

json from_message(const proton::message& m) {
    json out = json::object();
    // Proton C++ cannot tell an absent header field from its default: the
    // defaults are printed too (as the Python agent does).
    json h = json::object();
    h["durable"] = m.durable();
    h["priority"] = int(m.priority());
    h["first_acquirer"] = m.first_acquirer();
    h["delivery_count"] = m.delivery_count();
    if (m.ttl().milliseconds() != 0) h["ttl"] = m.ttl().milliseconds();
    out["header"] = h;

    // The string fields read back "" when unset: an empty one is not printed.
    json p = json::object();
    if (!m.id().empty()) p["message_id"] = to_typed(scalar_value(m.id()));
    if (!m.user().empty()) p["user_id"] = hex(m.user());
    const std::pair<const char*, std::string> strings[] = {
        {"to", m.to()},
        {"subject", m.subject()},
        {"reply_to", m.reply_to()},
        {"content_type", m.content_type()},
        {"content_encoding", m.content_encoding()},
        {"group_id", m.group_id()},
        {"reply_to_group_id", m.reply_to_group_id()},
    };
    for (const auto& [field, value] : strings)
        if (!value.empty()) p[field] = value;
    if (!m.correlation_id().empty()) p["correlation_id"] = to_typed(scalar_value(m.correlation_id()));
    if (m.expiry_time().milliseconds() != 0) p["absolute_expiry_time"] = std::to_string(m.expiry_time().milliseconds());
    if (m.creation_time().milliseconds() != 0) p["creation_time"] = std::to_string(m.creation_time().milliseconds());
    if (m.group_sequence() != 0) p["group_sequence"] = m.group_sequence();
    if (!p.empty()) out["properties"] = p;

    if (!m.properties().empty()) {
        json props = json::object();
        const json pairs = to_typed(m.properties().value())["value"];
        for (const auto& kv : pairs) {
            const json& key = kv[0]["value"];
            props[key.is_string() ? key.get<std::string>() : key.dump()] = kv[1];
        }
        out["application_properties"] = props;
    }

    const proton::value& body = m.body();
    if (m.inferred() && body.type() == proton::BINARY) {
        auto b = proton::get<proton::binary>(body);
        out["body"] = json{{"data", hex(b.data(), b.size())}};
    } else if (m.inferred() && body.type() == proton::LIST) {
        out["body"] = json{{"sequence", json::array({to_typed(body)["value"]})}};
    } else if (!body.empty() || !m.inferred()) {
        // Proton C++ holds a null as an empty value, so an amqp-value of null
        // and no body section at all both read back as {"value": null} (as in
        // the Python agent).
        out["body"] = json{{"value", to_typed(body)}};
    }
    return out;
}

proton::message to_message(const json& spec) {
    if (!spec.is_object()) throw std::invalid_argument("a message is a JSON object: " + spec.dump());
    proton::message m;
    if (spec.contains("header")) {
        const json& h = spec["header"];
        if (h.contains("durable")) m.durable(h["durable"].get<bool>());
        if (h.contains("priority")) m.priority(int_of<uint8_t>(h["priority"]));
        if (h.contains("ttl")) m.ttl(proton::duration(int_of<uint32_t>(h["ttl"])));
        if (h.contains("first_acquirer")) m.first_acquirer(h["first_acquirer"].get<bool>());
        if (h.contains("delivery_count")) m.delivery_count(int_of<uint32_t>(h["delivery_count"]));
    }
    if (spec.contains("properties")) {
        const json& p = spec["properties"];
        if (p.contains("message_id")) m.id(message_id_of(p["message_id"]));
        if (p.contains("user_id")) {
            auto bytes = unhex(p["user_id"]);
            m.user(std::string(bytes.begin(), bytes.end()));
        }
        if (p.contains("to")) m.to(string_of(p["to"]));
        if (p.contains("subject")) m.subject(string_of(p["subject"]));
        if (p.contains("reply_to")) m.reply_to(string_of(p["reply_to"]));
        if (p.contains("correlation_id")) m.correlation_id(message_id_of(p["correlation_id"]));
        if (p.contains("content_type")) m.content_type(string_of(p["content_type"]));
        if (p.contains("content_encoding")) m.content_encoding(string_of(p["content_encoding"]));
        if (p.contains("absolute_expiry_time"))
            m.expiry_time(proton::timestamp(wide_of<int64_t>(p["absolute_expiry_time"])));
        if (p.contains("creation_time")) m.creation_time(proton::timestamp(wide_of<int64_t>(p["creation_time"])));
        if (p.contains("group_id")) m.group_id(string_of(p["group_id"]));
        if (p.contains("group_sequence")) m.group_sequence(int_of<int32_t>(p["group_sequence"]));
        if (p.contains("reply_to_group_id")) m.reply_to_group_id(string_of(p["reply_to_group_id"]));
    }
    if (spec.contains("application_properties")) {
        // Built as one map value in file order (keys are AMQP strings).
        proton::value props;
        encoder e(props);
        e << start::map();
        for (const auto& [key, v] : spec["application_properties"].items()) {
            e << key;
            put(e, v);
        }
        e << finish();
        m.properties().value(props);
    }
    if (spec.contains("body") && !spec["body"].is_null()) {
        const json& b = spec["body"];
        if (b.contains("value")) {
            // (A null value leaves the message without a body section: Proton
            // C++ cannot send an amqp-value holding null.)
            m.body(from_typed(b["value"]));
        } else if (b.contains("data")) {
            auto bytes = unhex(b["data"]);
            m.body(proton::binary(bytes.begin(), bytes.end()));
            m.inferred(true);
        } else if (b.contains("sequence")) {
            const json& seqs = list_of(b["sequence"]);
            if (seqs.size() != 1)
                throw unsupported("Proton C++ sends one amqp-sequence section, not " + std::to_string(seqs.size()));
            proton::value list;
            encoder e(list);
            put_bare(e, proton::LIST, seqs[0]);
            m.body(list);
            m.inferred(true);
        } else {
            throw std::invalid_argument("a body is {value}, {data} or {sequence}: " + b.dump());
        }
    }
    return m;
}

} // namespace wharf::interop
