#include "wlm/metadata/etcd_watch.hpp"

#include "wlm/metadata/etcd_wire.hpp"

#include <algorithm>

namespace wharf::wlm::detail {

using nlohmann::json;

etcd_watch::etcd_watch(etcd_watch_options options)
    : options_(std::move(options)), from_(std::max<uint64_t>(options_.start_revision, 1)), next_(from_) {
    thread_ = std::thread([this] { run(); });
    prober_ = std::thread([this] { probe(); });
}

etcd_watch::~etcd_watch() {
    {
        std::lock_guard l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    stream_.cancel();
    thread_.join();
    prober_.join();
}

void etcd_watch::wait_started(std::chrono::milliseconds timeout) {
    std::unique_lock l(mu_);
    cv_.wait_for(l, timeout, [this] {
        return connected_ || compacted_ != 0 || failures_ >= options_.endpoints.size() || stop_;
    });
}

etcd_watch::taken etcd_watch::take(uint64_t after) {
    std::lock_guard l(mu_);
    taken out;
    out.compacted = compacted_;
    out.connected = connected_;
    out.last_error = last_error_;
    auto first = std::find_if(events_.begin(), events_.end(), [&](const event& e) { return e.revision > after; });
    events_.erase(events_.begin(), first);
    out.events = events_;
    from_ = std::max(from_, after + 1);
    return out;
}

uint64_t etcd_watch::covers_from() const {
    std::lock_guard l(mu_);
    return from_;
}

void etcd_watch::run() {
    size_t endpoint = 0;
    std::unique_lock l(mu_);
    while (!stop_ && compacted_ == 0) {
        json create = {{"key", base64_encode(options_.key)},
                       {"range_end", base64_encode(options_.range_end)},
                       {"start_revision", std::to_string(next_)}};
        const std::string body = json{{"create_request", create}}.dump();
        endpoint_ = endpoint;
        l.unlock();
        const etcd_endpoint& ep = options_.endpoints[endpoint];
        std::string why = stream_.run(ep, "/v3/watch", body, options_.connect_timeout,
                                      [&](std::string_view text) { return on_message(text, endpoint); });
        l.lock();
        connected_ = false;
        if (stop_ || compacted_ != 0) break;
        ++failures_;
        if (!why.empty() || last_error_.empty()) // else: the prober said why it cancelled
            last_error_ = "watch on " + ep.text() + ": " + (why.empty() ? std::string("ended") : why);
        cv_.notify_all();
        endpoint = (endpoint + 1) % options_.endpoints.size();
        cv_.wait_for(l, options_.retry_every, [this] { return stop_; });
    }
    cv_.notify_all();
}

// The prober thread: while the stream is open, a linearizable read at the
// same member every probe_every; a member that cannot answer one cannot be
// trusted to send events either.
void etcd_watch::probe() {
    const std::string body = json{{"key", base64_encode(options_.key)}, {"count_only", true}}.dump();
    std::unique_lock l(mu_);
    while (!stop_ && compacted_ == 0) {
        cv_.wait_for(l, options_.probe_every, [this] { return stop_; });
        if (stop_ || !connected_) continue;
        const size_t endpoint = endpoint_;
        const etcd_endpoint ep = options_.endpoints[endpoint];
        l.unlock();
        etcd_http_client client({ep}, options_.probe_every, options_.connect_timeout);
        auto reply = client.post("/v3/kv/range", body);
        const bool ok = reply && reply->status == 200;
        l.lock();
        if (ok || !connected_ || endpoint_ != endpoint || stop_) continue;
        last_error_ = "watch on " + ep.text() + ": the member did not answer a read within " +
                      std::to_string(options_.probe_every.count()) + " ms" +
                      (reply ? " (HTTP " + std::to_string(reply->status) + ")" : ": " + reply.error());
        l.unlock();
        stream_.interrupt(); // run() moves on to the next endpoint
        l.lock();
    }
}

// One message of the watch stream (watch thread). False ends the stream.
bool etcd_watch::on_message(std::string_view text, size_t endpoint) {
    json j = json::parse(text, nullptr, false);
    std::lock_guard l(mu_);
    if (j.is_discarded() || !j.is_object()) {
        last_error_ = "watch: a reply that is not JSON: " + std::string(text.substr(0, 200));
        return false;
    }
    if (auto err = error_of(j); !err.message.empty()) {
        last_error_ = "watch on " + options_.endpoints[endpoint].text() + ": " + err.message;
        return false;
    }
    const json& r = j.contains("result") ? j["result"] : j;
    if (uint64_t compact = static_cast<uint64_t>(int_field(r, "compact_revision")); compact != 0) {
        compacted_ = compact;
        last_error_ = "etcd compacted its history up to revision " + std::to_string(compact);
        cv_.notify_all();
        return false;
    }
    if (bool_field(r, "canceled")) {
        last_error_ = "etcd canceled the watch: " + r.value("cancel_reason", std::string("no reason given"));
        return false;
    }
    if (bool_field(r, "created")) {
        connected_ = true;
        failures_ = 0;
        last_error_.clear();
        cv_.notify_all();
    }
    auto evs = r.find("events");
    if (evs == r.end() || !evs->is_array()) return true;
    for (const auto& e : *evs) {
        const json& kv = e.contains("kv") ? e["kv"] : json::object();
        event ev;
        ev.erase = e.value("type", std::string("PUT")) == "DELETE";
        ev.key = bytes_field(kv, "key");
        ev.value = ev.erase ? std::string() : bytes_field(kv, "value");
        ev.revision = static_cast<uint64_t>(int_field(kv, "mod_revision"));
        ev.lease = int_field(kv, "lease");
        if (ev.revision < next_) continue; // already delivered before a reconnect
        events_.push_back(std::move(ev));
    }
    if (!events_.empty()) next_ = std::max(next_, events_.back().revision + 1);
    return true;
}

} // namespace wharf::wlm::detail
