#include "broker/management/request.hpp"

#include "broker/amqp/message_codec.hpp"
#include "broker/amqp/value_cursor.hpp"
#include "broker/common/text.hpp"

#include <proton/codec.h>

#include <charconv>
#include <cstdint>

namespace wharf::management {

namespace {

std::string_view as_text(pn_data_t* d) {
    pn_bytes_t b = pn_data_type(d) == PN_STRING ? pn_data_get_string(d) : pn_data_get_symbol(d);
    return {b.start, b.size};
}
bool is_text(pn_data_t* d) { return pn_data_type(d) == PN_STRING || pn_data_type(d) == PN_SYMBOL; }

// A float as the double its shortest decimal text reads as: 0.1f is 0.1,
// not 0.10000000149011612 (what the sender wrote, not its binary rounding).
double float_as_written(float v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    double out = v;
    if (ec == std::errc{}) std::from_chars(buf, end, out);
    return out;
}

// A scalar AMQP value as an attribute value; nullopt for lists, maps, ...
std::optional<plugins::attribute_value> scalar(pn_data_t* d) {
    switch (pn_data_type(d)) {
    case PN_NULL: return plugins::attribute_value{};
    case PN_BOOL: return plugins::attribute_value{pn_data_get_bool(d)};
    case PN_UBYTE: return plugins::attribute_value{int64_t{pn_data_get_ubyte(d)}};
    case PN_BYTE: return plugins::attribute_value{int64_t{pn_data_get_byte(d)}};
    case PN_USHORT: return plugins::attribute_value{int64_t{pn_data_get_ushort(d)}};
    case PN_SHORT: return plugins::attribute_value{int64_t{pn_data_get_short(d)}};
    case PN_UINT: return plugins::attribute_value{int64_t{pn_data_get_uint(d)}};
    case PN_INT: return plugins::attribute_value{int64_t{pn_data_get_int(d)}};
    case PN_ULONG:
        if (pn_data_get_ulong(d) > static_cast<uint64_t>(INT64_MAX)) return std::nullopt; // see why_not_scalar
        return plugins::attribute_value{static_cast<int64_t>(pn_data_get_ulong(d))};
    case PN_LONG: return plugins::attribute_value{static_cast<int64_t>(pn_data_get_long(d))};
    case PN_FLOAT: return plugins::attribute_value{float_as_written(pn_data_get_float(d))};
    case PN_DOUBLE: return plugins::attribute_value{pn_data_get_double(d)};
    case PN_STRING:
    case PN_SYMBOL: return plugins::attribute_value{std::string(as_text(d))};
    default: return std::nullopt;
    }
}

// A word for a value's AMQP type, in descriptions.
const char* type_word(pn_type_t t) {
    switch (t) {
    case PN_LIST: return "list";
    case PN_MAP: return "map";
    case PN_ARRAY: return "array";
    case PN_BINARY: return "binary";
    case PN_UUID: return "uuid";
    case PN_TIMESTAMP: return "timestamp";
    case PN_CHAR: return "char";
    case PN_DESCRIBED: return "described value";
    case PN_DECIMAL32: case PN_DECIMAL64: case PN_DECIMAL128: return "decimal";
    case PN_NULL: return "null";
    case PN_BOOL: return "boolean";
    case PN_SYMBOL: return "symbol";
    case PN_STRING: return "string";
    case PN_UBYTE: return "ubyte";
    case PN_BYTE: return "byte";
    case PN_USHORT: return "ushort";
    case PN_SHORT: return "short";
    case PN_UINT: return "uint";
    case PN_INT: return "int";
    case PN_ULONG: return "ulong";
    case PN_LONG: return "long";
    case PN_FLOAT: return "float";
    case PN_DOUBLE: return "double";
    default: return "value of another type";
    }
}

// Why the value at `d` cannot be an argument, when scalar() refuses it.
std::string why_not_scalar(pn_data_t* d) {
    if (pn_data_type(d) == PN_ULONG) return "is larger than 9223372036854775807";
    return std::string("is a ") + type_word(pn_data_type(d)) + ", not a string, a number, a boolean or null";
}

error bad(std::string what) { return {errc::invalid_field, std::move(what)}; }

// The application properties: every key a string, the values scalars.
result<plugins::entity, error> read_properties(pn_data_t* d) {
    plugins::entity out;
    pn_data_rewind(d);
    if (!pn_data_next(d)) return out; // none
    if (pn_data_type(d) != PN_MAP) return fail(bad("application-properties is not a map"));
    pn_data_enter(d);
    while (pn_data_next(d)) {
        if (!is_text(d)) return fail(bad("an application-properties key is not a string"));
        const std::string key(as_text(d));
        if (!pn_data_next(d)) break;
        auto v = scalar(d);
        if (!v) return fail(bad("application property " + quoted(printable(key, 200)) + " " + why_not_scalar(d)));
        out[key] = std::move(*v);
    }
    pn_data_exit(d);
    return out;
}

std::optional<std::string> text_of(const plugins::entity& e, const std::string& key) {
    auto it = e.find(key);
    if (it == e.end()) return std::nullopt;
    if (auto* s = std::get_if<std::string>(&it->second)) return *s;
    return std::nullopt;
}

void put_value(pn_data_t* d, const plugins::attribute_value& v) {
    if (std::holds_alternative<std::monostate>(v)) pn_data_put_null(d);
    else if (auto* b = std::get_if<bool>(&v)) pn_data_put_bool(d, *b);
    else if (auto* i = std::get_if<int64_t>(&v)) pn_data_put_long(d, *i);
    else if (auto* x = std::get_if<double>(&v)) pn_data_put_double(d, *x);
    else {
        const auto& s = std::get<std::string>(v);
        pn_data_put_string(d, pn_bytes(s.size(), s.data()));
    }
}

void put_string(pn_data_t* d, const std::string& s) { pn_data_put_string(d, pn_bytes(s.size(), s.data())); }

void put_strings(pn_data_t* d, const std::vector<std::string>& xs) {
    pn_data_put_list(d);
    pn_data_enter(d);
    for (const auto& x : xs) put_string(d, x);
    pn_data_exit(d);
}

} // namespace

result<request, error> decode_request(std::string_view bytes) {
    request r;
    // Our own scan first: it says what is wrong with bytes that are not a
    // message (Proton's decoder asserts on none at all, and takes some
    // garbage for an empty message), and it reads the reply-to whole,
    // where Proton's C string stops at a NUL.
    if (bytes.empty()) return fail(error{errc::decode_error, "the request is empty: it is not an AMQP message"});
    auto info = amqp::scan_message(bytes);
    if (!info)
        return fail(error{errc::decode_error, "the request is not a valid AMQP message: " + info.error().description});
    r.msg.reset(pn_message());
    if (pn_message_decode(r.msg.get(), bytes.data(), bytes.size()) != 0)
        return fail(error{errc::decode_error, "the request is not a valid AMQP message"});
    if (!info->reply_to || info->reply_to->empty())
        return fail(bad("the request has no reply-to: there is nowhere to send the answer"));
    r.reply_to = *info->reply_to;
    // The answer is published to the reply-to: a name no queue can have
    // would lose it after the request ran.
    if (auto why = check_queue_name(r.reply_to))
        return fail(bad("reply-to " + quoted(printable(r.reply_to, 200)) + " cannot take the answer: " + *why));
    // Proton reads no section with a symbolic descriptor, where our scan
    // does: its message would lack what the scan found (the reply-to, the
    // id, the properties), and the answer would come from half a request.
    const char* proton_reply_to = pn_message_get_reply_to(r.msg.get());
    if (proton_reply_to == nullptr || r.reply_to != proton_reply_to)
        return fail(error{errc::decode_error, "the request's sections could not all be read here (a section with a "
                                              "symbolic descriptor?): send them with their numeric descriptors"});
    // The answer's correlation-id is the request's message-id (else its
    // correlation-id). Proton drops an id of a type AMQP does not allow, and
    // the answer would then come back with none the client could match.
    const bool by_message_id = info->message_id_code != 0x40;
    const uint8_t id_code = by_message_id ? info->message_id_code : info->correlation_id_code;
    if (!amqp::is_message_id_code(id_code)) {
        r.problem = bad(std::string(by_message_id ? "message-id" : "correlation-id") + " is of type " +
                        amqp::type_family(id_code) +
                        ": AMQP allows a ulong, uuid, binary or string, and the answer could not carry it back");
        return r;
    }
    auto props = read_properties(pn_message_properties(r.msg.get()));
    if (!props) {
        r.problem = props.error();
        return r;
    }
    // The body: a map of arguments (QUERY: attributeNames), or nothing.
    pn_data_t* body = pn_message_body(r.msg.get());
    pn_data_rewind(body);
    if (pn_data_next(body)) {
        if (pn_data_type(body) == PN_MAP) {
            r.body_is_map = true;
            pn_data_enter(body);
            while (pn_data_next(body)) {
                if (!is_text(body)) {
                    r.problem = bad(std::string("a key of the body's map is a ") + type_word(pn_data_type(body)) +
                                    ", not a string");
                    return r;
                }
                const std::string key(as_text(body));
                if (!pn_data_next(body)) break;
                // attributeNames: a list, or an array (Proton C++'s encoding of
                // std::vector<std::string>) of strings.
                const bool names_list = pn_data_type(body) == PN_LIST || pn_data_type(body) == PN_ARRAY;
                if (key == "attributeNames" && !names_list && pn_data_type(body) != PN_NULL) {
                    r.problem = bad("attributeNames is not a list (send a list of attribute names; empty means all)");
                    return r;
                }
                if (key == "attributeNames" && names_list) {
                    pn_data_enter(body);
                    while (pn_data_next(body)) {
                        if (!is_text(body)) {
                            r.problem = bad("attributeNames holds a value that is not a string");
                            return r;
                        }
                        r.attribute_names.emplace_back(as_text(body));
                    }
                    pn_data_exit(body);
                } else if (auto v = scalar(body)) {
                    r.args[key] = std::move(*v);
                } else {
                    // Dropped, a setting given in the wrong type would be
                    // answered as if it had not been sent.
                    r.problem = bad("the argument " + quoted(printable(key, 200)) + " " + why_not_scalar(body));
                    return r;
                }
            }
            pn_data_exit(body);
        } else if (pn_data_type(body) != PN_NULL) {
            r.args["$body-not-a-map"] = true; // what the operation makes of it
        }
    }
    for (auto& [k, v] : *props) {
        if (!r.args.count(k)) r.property_only.push_back(k);
        r.args[k] = v;
    }
    auto op = text_of(*props, "operation");
    if (!op || op->empty()) return r; // answered with 400 by the service: it can reply
    // A mistyped name or type is a mistake to answer, not an absent one.
    for (const char* key : {"type", "name", "identity", "entityType"}) {
        auto it = props->find(key);
        if (it != props->end() && !std::holds_alternative<std::monostate>(it->second) &&
            !std::holds_alternative<std::string>(it->second)) {
            r.problem = bad(std::string("'") + key + "' must be a string");
            return r;
        }
    }
    r.operation = *op;
    r.type = text_of(*props, "type").value_or("");
    r.name = text_of(*props, "name").value_or(text_of(*props, "identity").value_or(""));
    r.entity_type = text_of(*props, "entityType").value_or("");
    // offset and count: whole numbers (their sign is checked by the
    // service); another type is a mistake to answer, not to ignore.
    for (const char* key : {"offset", "count"}) {
        auto it = props->find(key);
        if (it == props->end() || std::holds_alternative<std::monostate>(it->second)) continue;
        auto* i = std::get_if<int64_t>(&it->second);
        if (i == nullptr) {
            r.problem = bad(std::string("'") + key + "' must be a whole number");
            return r;
        }
        if (std::string_view(key) == "offset") r.offset = *i;
        else r.count = *i;
    }
    return r;
}

reply status_reply(int status, std::string description) {
    reply r;
    r.status = status;
    r.description = std::move(description);
    return r;
}

reply error_reply(const error& e) {
    int status = 500;
    switch (e.code) {
    case errc::not_found: status = 404; break;
    case errc::invalid_field:
    case errc::decode_error:
    case errc::message_size_exceeded: status = 400; break;
    case errc::not_allowed: status = 403; break;
    case errc::not_implemented: status = 501; break;
    case errc::resource_limit_exceeded:
    case errc::transfer_limit_exceeded:
    case errc::detach_forced:
    case errc::redirect:
    case errc::connection_forced:
    case errc::internal_error: status = 500; break;
    }
    return status_reply(status, e.description);
}

std::string encode_reply(const request& req, const reply& rep) {
    message_ptr m(pn_message());
    // correlation-id: the request's message-id, else its correlation-id.
    pn_msgid_t id = pn_message_get_id(req.msg.get());
    if (id.type == PN_NULL) id = pn_message_get_correlation_id(req.msg.get());
    if (id.type != PN_NULL) pn_message_set_correlation_id(m.get(), id);
    pn_message_set_address(m.get(), req.reply_to.c_str()); // a queue's name: no NUL (decode_request)
    pn_data_t* props = pn_message_properties(m.get());
    pn_data_put_map(props);
    pn_data_enter(props);
    pn_data_put_string(props, pn_bytes(10, "statusCode"));
    pn_data_put_int(props, rep.status);
    pn_data_put_string(props, pn_bytes(17, "statusDescription"));
    put_string(props, printable(rep.description)); // it may name what the request sent
    if (rep.count) {
        pn_data_put_string(props, pn_bytes(5, "count"));
        pn_data_put_long(props, *rep.count);
    }
    pn_data_exit(props);
    pn_data_t* body = pn_message_body(m.get());
    if (rep.map) {
        pn_data_put_map(body);
        pn_data_enter(body);
        for (const auto& [k, v] : *rep.map) {
            put_string(body, k);
            put_value(body, v);
        }
        pn_data_exit(body);
    } else if (rep.names && rep.rows) {
        pn_data_put_map(body);
        pn_data_enter(body);
        put_string(body, "attributeNames");
        put_strings(body, *rep.names);
        put_string(body, "results");
        pn_data_put_list(body);
        pn_data_enter(body);
        for (const auto& row : *rep.rows) {
            pn_data_put_list(body);
            pn_data_enter(body);
            for (const auto& v : row) put_value(body, v);
            pn_data_exit(body);
        }
        pn_data_exit(body);
        pn_data_exit(body);
    } else if (rep.list) {
        put_strings(body, *rep.list);
    } else if (rep.map_of_lists) {
        pn_data_put_map(body);
        pn_data_enter(body);
        for (const auto& [k, xs] : *rep.map_of_lists) {
            put_string(body, k);
            put_strings(body, xs);
        }
        pn_data_exit(body);
    }
    std::string out(1024, '\0');
    for (;;) {
        size_t size = out.size();
        const int rc = pn_message_encode(m.get(), out.data(), &size);
        if (rc == 0) {
            out.resize(size);
            return out;
        }
        if (rc != PN_OVERFLOW) return {};
        out.resize(out.size() * 2);
    }
}

} // namespace wharf::management
