#include "wlm/metadata/etcd_metadata_store.hpp"

#include "wlm/metadata/etcd_http.hpp"
#include "wlm/metadata/etcd_watch.hpp"
#include "wlm/metadata/etcd_wire.hpp"

#include <map>

namespace wharf::wlm {

using detail::base64_encode;
using detail::bytes_field;
using detail::int_field;
using nlohmann::json;

namespace {

constexpr std::string_view scheme = "etcd://";

// gRPC status codes etcd's gateway passes on.
constexpr int grpc_invalid_argument = 3;
constexpr int grpc_deadline_exceeded = 4;
constexpr int grpc_not_found = 5;
constexpr int grpc_unavailable = 14;

bool valid_key(std::string_view key) { return !key.empty() && key.find('\0') == std::string_view::npos; }
std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string num(int64_t v) { return std::to_string(v); }

int64_t system_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

struct etcd_metadata_store::impl {
    impl(etcd_store_options o, std::vector<detail::etcd_endpoint> eps)
        : options(std::move(o)), endpoints(std::move(eps)),
          http(endpoints, options.request_timeout, options.connect_timeout) {
        for (const auto& e : options.endpoints) spec += (spec.empty() ? "" : ",") + e;
        spec = std::string(scheme) + spec + options.prefix;
    }

    etcd_store_options options;
    std::vector<detail::etcd_endpoint> endpoints;
    detail::etcd_http_client http;
    std::string spec; // for error descriptions
    std::map<std::string, std::unique_ptr<detail::etcd_watch>, std::less<>> watches; // by the caller's prefix

    failure<store_error> error(store_errc code, std::string_view op, std::string_view what) const {
        return fail(store_error{code, "metadata store " + in_quotes(spec) + ": " + std::string(op) + ": " +
                                          std::string(what)});
    }

    std::string full(std::string_view key) const { return options.prefix + std::string(key); }
    std::string b64(std::string_view key) const { return base64_encode(full(key)); }
    std::string strip(const std::string& key) const {
        return key.rfind(options.prefix, 0) == 0 ? key.substr(options.prefix.size()) : key;
    }
    key_value to_kv(const json& kv) const {
        return key_value{strip(bytes_field(kv, "key")), bytes_field(kv, "value"),
                         static_cast<uint64_t>(int_field(kv, "mod_revision")), int_field(kv, "lease")};
    }

    // One request to the gateway: its reply's JSON (inside "result" for the
    // streaming calls), or a store_error for a transport failure or an error
    // reply.
    result<json, store_error> call(std::string_view op, std::string_view target, const json& body) {
        auto r = http.post(target, body.dump());
        if (!r) return error(store_errc::unavailable, op, r.error());
        json j = json::parse(r->body, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return error(store_errc::io, op,
                         "etcd answered HTTP " + std::to_string(r->status) + " with " + r->body.substr(0, 200));
        if (auto e = detail::error_of(j); !e.message.empty()) {
            if (e.code == grpc_not_found && e.message.find("lease not found") != std::string::npos)
                return error(store_errc::lease_expired, op, "the lease has expired or was revoked (" + e.message + ")");
            if (e.code == grpc_unavailable || e.code == grpc_deadline_exceeded)
                return error(store_errc::unavailable, op, e.message);
            if (e.code == grpc_invalid_argument) return error(store_errc::invalid, op, e.message);
            return error(store_errc::io, op, e.message);
        }
        if (r->status != 200) return error(store_errc::io, op, "etcd answered HTTP " + std::to_string(r->status));
        if (auto res = j.find("result"); res != j.end() && res->is_object()) return *res;
        return j;
    }

    // A txn on one key: compare its version with `expected`, run `success`
    // if it matches, else read the key (for the conflict's description).
    result<json, store_error> txn(std::string_view op, std::string_view key, uint64_t expected, json success) {
        json cmp = {{"key", b64(key)}, {"result", "EQUAL"}};
        if (expected == 0) {
            cmp["target"] = "CREATE";
            cmp["create_revision"] = "0";
        } else {
            cmp["target"] = "MOD";
            cmp["mod_revision"] = num(static_cast<int64_t>(expected));
        }
        json body = {{"compare", json::array({cmp})},
                     {"success", std::move(success)},
                     {"failure", json::array({json{{"request_range", {{"key", b64(key)}}}}})}};
        return call(op, "/v3/kv/txn", body);
    }

    failure<store_error> conflict(std::string_view op, uint64_t expected, const json& reply) const {
        std::string found = "no key";
        auto responses = reply.find("responses");
        if (responses != reply.end() && responses->is_array() && !responses->empty()) {
            const json& range = (*responses)[0].value("response_range", json::object());
            auto kvs = range.find("kvs");
            if (kvs != range.end() && kvs->is_array() && !kvs->empty())
                found = std::to_string(int_field((*kvs)[0], "mod_revision"));
        }
        return error(store_errc::conflict, op, "expected version " + std::to_string(expected) + ", found " + found);
    }
};

etcd_metadata_store::etcd_metadata_store(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
etcd_metadata_store::~etcd_metadata_store() = default;

result<etcd_store_options, std::string> etcd_metadata_store::parse_spec(const std::string& spec) {
    if (spec.rfind(scheme, 0) != 0) return fail("'" + spec + "' does not start with etcd://");
    std::string_view rest = std::string_view(spec).substr(scheme.size());
    const auto slash = rest.find('/');
    std::string_view hosts = rest.substr(0, slash);
    auto eps = detail::parse_endpoints(hosts);
    if (!eps) return fail("'" + spec + "': " + eps.error() + " (want etcd://HOST:PORT[,HOST:PORT...][/PREFIX])");
    etcd_store_options o;
    for (const auto& e : *eps) o.endpoints.push_back(e.text());
    if (slash != std::string_view::npos && slash + 1 < rest.size()) {
        o.prefix = std::string(rest.substr(slash));
        if (o.prefix.back() != '/') o.prefix += '/';
    }
    return o;
}

result<std::unique_ptr<etcd_metadata_store>, store_error> etcd_metadata_store::open(const std::string& spec) {
    auto o = parse_spec(spec);
    if (!o) return fail(store_error{store_errc::invalid, "metadata store: " + o.error()});
    return open(std::move(*o));
}

result<std::unique_ptr<etcd_metadata_store>, store_error> etcd_metadata_store::open(etcd_store_options options) {
    std::vector<detail::etcd_endpoint> eps;
    for (const auto& e : options.endpoints) {
        auto one = detail::parse_endpoints(e);
        if (!one || one->size() != 1)
            return fail(store_error{store_errc::invalid, "metadata store: etcd endpoint '" + e + "' is not HOST:PORT"});
        eps.push_back(one->front());
    }
    if (eps.empty()) return fail(store_error{store_errc::invalid, "metadata store: no etcd endpoint given"});
    if (options.prefix.empty() || options.prefix.find('\0') != std::string::npos)
        return fail(store_error{store_errc::invalid, "metadata store: the etcd key prefix must not be empty"});
    if (options.request_timeout.count() <= 0 || options.connect_timeout.count() <= 0)
        return fail(store_error{store_errc::invalid, "metadata store: etcd timeouts must be positive"});
    return std::unique_ptr<etcd_metadata_store>(
        new etcd_metadata_store(std::make_unique<impl>(std::move(options), std::move(eps))));
}

result<std::optional<key_value>, store_error> etcd_metadata_store::get(std::string_view key) {
    const std::string op = "get " + in_quotes(key);
    if (!valid_key(key)) return impl_->error(store_errc::invalid, op, "the key is empty or contains a NUL byte");
    auto r = impl_->call(op, "/v3/kv/range", json{{"key", impl_->b64(key)}});
    if (!r) return fail(r.error());
    auto kvs = r->find("kvs");
    if (kvs == r->end() || !kvs->is_array() || kvs->empty()) return std::optional<key_value>();
    return std::optional<key_value>(impl_->to_kv((*kvs)[0]));
}

result<std::vector<key_value>, store_error> etcd_metadata_store::list(std::string_view prefix) {
    const std::string op = "list " + in_quotes(prefix);
    const std::string from = impl_->full(prefix);
    auto r = impl_->call(op, "/v3/kv/range",
                         json{{"key", base64_encode(from)}, {"range_end", base64_encode(detail::range_end_of(from))}});
    if (!r) return fail(r.error());
    std::vector<key_value> out;
    if (auto kvs = r->find("kvs"); kvs != r->end() && kvs->is_array())
        for (const auto& kv : *kvs) out.push_back(impl_->to_kv(kv));
    return out;
}

result<uint64_t, store_error> etcd_metadata_store::compare_and_set(std::string_view key, uint64_t expected,
                                                                   std::string_view value, lease_id lease) {
    const std::string op = "compare_and_set " + in_quotes(key);
    if (!valid_key(key)) return impl_->error(store_errc::invalid, op, "the key is empty or contains a NUL byte");
    json put = {{"key", impl_->b64(key)}, {"value", base64_encode(value)}};
    if (lease != 0) put["lease"] = num(lease);
    auto r = impl_->txn(op, key, expected, json::array({json{{"request_put", put}}}));
    if (!r) {
        if (r.error().code == store_errc::lease_expired)
            return impl_->error(store_errc::lease_expired, op,
                                "lease " + num(lease) + " has expired or was revoked");
        return fail(r.error());
    }
    if (!detail::bool_field(*r, "succeeded")) return impl_->conflict(op, expected, *r);
    return static_cast<uint64_t>(int_field(r->value("header", json::object()), "revision"));
}

// One txn per chunk of keys: if every key is still absent all are put, at
// one revision; if not, the txn reads them instead, and the absent ones are
// tried again without those that exist.
result<std::vector<std::optional<uint64_t>>, store_error>
etcd_metadata_store::create_many(const std::vector<new_key>& kvs) {
    const std::string op = "create_many (" + std::to_string(kvs.size()) + " keys)";
    for (const auto& kv : kvs)
        if (!valid_key(kv.first))
            return impl_->error(store_errc::invalid, op, "key " + in_quotes(kv.first) + " is empty or contains a NUL byte");
    constexpr size_t chunk = 64; // etcd takes at most 128 operations in a txn by default (--max-txn-ops)
    std::vector<std::optional<uint64_t>> out(kvs.size());
    for (size_t begin = 0; begin < kvs.size(); begin += chunk) {
        std::vector<size_t> todo;
        for (size_t i = begin; i < std::min(kvs.size(), begin + chunk); ++i) todo.push_back(i);
        while (!todo.empty()) {
            json compare = json::array(), success = json::array(), failure = json::array();
            for (size_t i : todo) {
                const std::string key = impl_->b64(kvs[i].first);
                compare.push_back({{"key", key}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}});
                success.push_back({{"request_put", {{"key", key}, {"value", base64_encode(kvs[i].second)}}}});
                failure.push_back({{"request_range", {{"key", key}, {"count_only", true}}}});
            }
            auto r = impl_->call(op, "/v3/kv/txn",
                                 json{{"compare", std::move(compare)}, {"success", std::move(success)},
                                      {"failure", std::move(failure)}});
            if (!r) return fail(r.error());
            if (detail::bool_field(*r, "succeeded")) {
                const auto rev = static_cast<uint64_t>(int_field(r->value("header", json::object()), "revision"));
                for (size_t i : todo) out[i] = rev;
                break;
            }
            const json responses = r->value("responses", json::array());
            std::vector<size_t> absent;
            for (size_t n = 0; n < todo.size(); ++n) {
                const json range = n < responses.size() ? responses[n].value("response_range", json::object())
                                                        : json::object();
                if (int_field(range, "count") == 0) absent.push_back(todo[n]);
            }
            if (absent.size() == todo.size()) // nothing in the way, yet refused: do not loop
                return impl_->error(store_errc::io, op, "etcd refused the transaction, yet none of its keys exists");
            todo = std::move(absent);
        }
    }
    return out;
}

result<bool, store_error> etcd_metadata_store::compare_and_delete(std::string_view key, uint64_t expected) {
    const std::string op = "compare_and_delete " + in_quotes(key);
    if (!valid_key(key)) return impl_->error(store_errc::invalid, op, "the key is empty or contains a NUL byte");
    json success = json::array();
    if (expected != 0) success.push_back(json{{"request_delete_range", {{"key", impl_->b64(key)}}}});
    auto r = impl_->txn(op, key, expected, std::move(success));
    if (!r) return fail(r.error());
    if (!detail::bool_field(*r, "succeeded")) return impl_->conflict(op, expected, *r);
    return expected != 0; // expected 0 matched an absent key: nothing to delete
}

result<lease_id, store_error> etcd_metadata_store::grant_lease(std::chrono::milliseconds ttl) {
    if (ttl.count() <= 0 || ttl > std::chrono::hours(24 * 365))
        return impl_->error(store_errc::invalid, "grant_lease",
                            "ttl " + std::to_string(ttl.count()) + " ms is not in 1 ms .. 365 days");
    const int64_t seconds = (ttl.count() + 999) / 1000;
    auto r = impl_->call("grant_lease", "/v3/lease/grant", json{{"TTL", num(seconds)}, {"ID", "0"}});
    if (!r) return fail(r.error());
    const lease_id id = int_field(*r, "ID");
    if (id == 0)
        return impl_->error(store_errc::io, "grant_lease",
                            "etcd granted no lease: " + r->value("error", std::string("no reason given")));
    return id;
}

result<bool, store_error> etcd_metadata_store::keep_alive(lease_id id) {
    const std::string op = "keep_alive " + num(id);
    auto r = impl_->call(op, "/v3/lease/keepalive", json{{"ID", num(id)}});
    if (!r) return fail(r.error());
    if (int_field(*r, "TTL") <= 0)
        return impl_->error(store_errc::lease_expired, op, "the lease has expired or was revoked; its keys are gone");
    return true;
}

result<bool, store_error> etcd_metadata_store::revoke_lease(lease_id id) {
    auto r = impl_->call("revoke_lease " + num(id), "/v3/lease/revoke", json{{"ID", num(id)}});
    if (!r) {
        if (r.error().code == store_errc::lease_expired) return false;
        return fail(r.error());
    }
    return true;
}

result<int64_t, store_error> etcd_metadata_store::lease_expiry(lease_id id) {
    const std::string op = "lease_expiry " + num(id);
    auto r = impl_->call(op, "/v3/lease/timetolive", json{{"ID", num(id)}});
    if (!r) return fail(r.error());
    const int64_t ttl = int_field(*r, "TTL");
    if (ttl < 0 || int_field(*r, "grantedTTL") <= 0)
        return impl_->error(store_errc::lease_expired, op, "the lease has expired or was revoked");
    return system_now_ms() + ttl * 1000;
}

result<uint64_t, store_error> etcd_metadata_store::revision() {
    auto r = impl_->call("revision", "/v3/kv/range",
                         json{{"key", base64_encode(impl_->options.prefix)}, {"count_only", true}});
    if (!r) return fail(r.error());
    return static_cast<uint64_t>(int_field(r->value("header", json::object()), "revision"));
}

result<std::vector<change>, store_error> etcd_metadata_store::changes_since(std::string_view prefix, uint64_t after) {
    const std::string op = "changes_since " + in_quotes(prefix) + " after " + std::to_string(after);
    auto& s = *impl_;
    auto it = s.watches.find(prefix);
    if (it == s.watches.end() || after + 1 < it->second->covers_from()) {
        // First call for this prefix, or the caller went back before what
        // the watch holds: watch (again) from after + 1.
        if (it != s.watches.end()) s.watches.erase(it);
        detail::etcd_watch_options w;
        w.endpoints = s.endpoints;
        w.key = s.full(prefix);
        w.range_end = detail::range_end_of(w.key);
        w.start_revision = after + 1;
        w.connect_timeout = s.options.connect_timeout;
        it = s.watches.emplace(std::string(prefix), std::make_unique<detail::etcd_watch>(std::move(w))).first;
        it->second->wait_started(s.options.request_timeout);
    }
    auto got = it->second->take(after);
    if (got.compacted != 0) {
        s.watches.erase(it);
        return s.error(store_errc::invalid, op,
                       "etcd compacted its history up to revision " + std::to_string(got.compacted) +
                           "; list() the keys again and follow changes from revision()");
    }
    if (got.events.empty() && !got.connected)
        return s.error(store_errc::unavailable, op,
                       got.last_error.empty() ? std::string("the watch is not connected yet") : got.last_error);
    std::vector<change> out;
    out.reserve(got.events.size());
    for (auto& e : got.events)
        out.push_back(change{e.erase ? change::erase : change::put,
                             key_value{s.strip(e.key), std::move(e.value), e.revision, e.lease}});
    return out;
}

} // namespace wharf::wlm
