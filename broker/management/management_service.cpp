#include "broker/management/management_service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace wharf::management {

namespace {
std::string join(const std::vector<std::string>& xs) {
    std::string out;
    for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
    return out;
}

const std::vector<std::string> node_operations = {"GET-TYPES", "GET-ATTRIBUTES", "GET-OPERATIONS",
                                                  "GET-MGMT-NODES", "QUERY"};

std::string name_of(const plugins::entity& e) {
    auto it = e.find("name");
    if (it == e.end()) return {};
    auto* s = std::get_if<std::string>(&it->second);
    return s ? *s : std::string();
}
} // namespace

bool node_scoped(const request& r) {
    auto it = r.args.find("wharf:scope");
    if (it == r.args.end()) return false;
    auto* s = std::get_if<std::string>(&it->second);
    return s != nullptr && *s == "node";
}

// One type name, several providers: attributes and operations are the
// union; entities with the same name are one (earlier providers first); an
// operation goes to the last provider that declares and handles it.
// Requests scoped to the node leave out the providers that ask peers.
class management_service::merged_type {
  public:
    explicit merged_type(plugins::entity_type& first) : parts_{&first} {}
    void add(plugins::entity_type& t) { parts_.push_back(&t); }
    std::string_view type_name() const { return parts_.front()->type_name(); }
    std::vector<std::string> attribute_names() const {
        std::vector<std::string> out;
        for (auto* p : parts_)
            for (auto& a : p->attribute_names())
                if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
        return out;
    }
    std::vector<std::string> operation_names() const {
        std::vector<std::string> out;
        for (auto* p : parts_)
            for (auto& o : p->operation_names())
                if (std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
        return out;
    }
    // Every entity; with `name`, at least the one of that name (READ).
    result<std::vector<plugins::entity>, error> query(bool node_only, const std::string* name = nullptr) {
        std::vector<plugins::entity> out;
        std::map<std::string, size_t> at; // name -> index in out
        for (auto* p : parts_) {
            if (node_only && p->asks_peers()) continue;
            auto rows = name != nullptr ? p->read(*name) : p->query();
            if (!rows) return fail(rows.error());
            for (auto& e : *rows) {
                auto [it, fresh] = at.emplace(name_of(e), out.size());
                if (fresh) out.push_back(std::move(e));
                else
                    for (auto& [k, v] : e) out[it->second].emplace(k, std::move(v));
            }
        }
        return out;
    }
    result<plugins::entity, error> invoke(std::string_view op, std::string_view name, const plugins::entity& args,
                                          bool node_only) {
        for (auto it = parts_.rbegin(); it != parts_.rend(); ++it) {
            plugins::entity_type* p = *it;
            if (node_only && p->asks_peers()) continue;
            const auto ops = p->operation_names();
            if (std::find(ops.begin(), ops.end(), op) != ops.end() && p->handles(op, name))
                return p->invoke(op, name, args);
        }
        return fail(error{errc::not_implemented, "operation '" + std::string(op) + "' on " +
                                                     std::string(type_name()) + " '" + std::string(name) + "'"});
    }

  private:
    std::vector<plugins::entity_type*> parts_;
};

management_service::management_service(publish_fn publish) : publish_(std::move(publish)) {}

management_service::~management_service() { stop(); }

void management_service::add_type(plugins::entity_type& t) {
    for (auto& m : merged_) {
        if (m->type_name() == t.type_name()) {
            m->add(t);
            return;
        }
    }
    merged_.push_back(std::make_unique<merged_type>(t));
}

void management_service::start() {
    worker_ = std::thread([this] { run(false); });
    node_worker_ = std::thread([this] { run(true); });
}

void management_service::stop() {
    {
        std::lock_guard l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    if (node_worker_.joinable()) node_worker_.join();
}

void management_service::submit(request&& r) {
    {
        std::lock_guard l(mu_);
        if (stop_) return;
        (node_scoped(r) ? node_queue_ : queue_).push_back(std::move(r));
    }
    cv_.notify_all();
}

void management_service::run(bool node_scope) {
    std::deque<request>& mine = node_scope ? node_queue_ : queue_;
    std::unique_lock l(mu_);
    for (;;) {
        cv_.wait(l, [&] { return stop_ || !mine.empty(); });
        if (stop_) return;
        request r = std::move(mine.front());
        mine.pop_front();
        l.unlock();
        reply rep;
        try {
            rep = handle(r);
        } catch (const std::exception& e) { // e.g. no thread or memory for asking peers: answer, stay up
            rep = status_reply(500, std::string("the request failed: ") + e.what());
        }
        if (rep.status >= 400)
            spdlog::info("management: {} {} '{}': {} {}", r.operation, r.type, r.name, rep.status, rep.description);
        publish_(r.reply_to, encode_reply(r, rep));
        l.lock();
    }
}

management_service::merged_type* management_service::find_type(const std::string& name) const {
    for (const auto& m : merged_) {
        merged_type* t = m.get();
        const std::string_view full = t->type_name();
        if (full == name) return t;
        // Short names: "queue" for "wharf.queue".
        const size_t dot = full.rfind('.');
        if (dot != std::string_view::npos && full.substr(dot + 1) == name) return t;
    }
    return nullptr;
}

reply management_service::handle(const request& r) {
    if (r.problem) return error_reply(*r.problem);
    if (r.operation.empty())
        return status_reply(400, "the request has no application property 'operation' (a string)");
    if (r.args.count("$body-not-a-map"))
        return status_reply(400, "the request's body is not a map (send a map of arguments, or no body)");
    if (r.offset < 0) return status_reply(400, "'offset' must not be negative");
    if (r.count && *r.count < 0) return status_reply(400, "'count' must not be negative");
    if (r.type.empty() || r.type == node_type) return node_operation(r);
    merged_type* t = find_type(r.type);
    if (t == nullptr) return status_reply(404, "unknown entity type '" + r.type + "'");
    if (r.operation == "QUERY") return query(*t, r);
    if (r.operation == "READ") return read(*t, r);
    const auto ops = t->operation_names();
    if (std::find(ops.begin(), ops.end(), r.operation) == ops.end())
        return status_reply(501, "operation '" + r.operation + "' is not supported on " + std::string(t->type_name()) +
                                     " (supported: READ, QUERY" + (ops.empty() ? "" : ", " + join(ops)) + ")");
    if (r.name.empty())
        return status_reply(400, r.operation + " needs the application property 'name' (or 'identity')");
    // CREATE and UPDATE take their settings from the body: application
    // properties beyond the request's own (a client's noise) must not read
    // as misspelt settings.
    plugins::entity args = r.args;
    if (r.operation == "UPDATE" || r.operation == "CREATE")
        for (const auto& k : r.property_only)
            if (k != "wharf:scope") args.erase(k);
    auto out = t->invoke(r.operation, r.name, args, node_scoped(r));
    if (!out) return error_reply(out.error());
    reply rep = status_reply(r.operation == "CREATE" ? 201 : r.operation == "DELETE" ? 204 : 200,
                             r.operation == "CREATE" ? "Created" : r.operation == "DELETE" ? "No Content" : "OK");
    if (r.operation != "DELETE") rep.map = std::move(*out);
    return rep;
}

reply management_service::node_operation(const request& r) {
    const std::string& op = r.operation;
    if (op == "QUERY") {
        const std::string& wanted = !r.entity_type.empty() ? r.entity_type : r.type;
        if (wanted.empty() || wanted == node_type)
            return status_reply(400, "QUERY needs the application property 'entityType' (a type; see GET-TYPES)");
        merged_type* t = find_type(wanted);
        if (t == nullptr) return status_reply(404, "unknown entity type '" + wanted + "'");
        return query(*t, r);
    }
    // Optionally narrowed to one type with entityType.
    std::vector<merged_type*> which;
    if (!r.entity_type.empty()) {
        merged_type* t = find_type(r.entity_type);
        if (t == nullptr) return status_reply(404, "unknown entity type '" + r.entity_type + "'");
        which.push_back(t);
    } else {
        for (const auto& m : merged_) which.push_back(m.get());
    }
    reply rep;
    if (op == "GET-TYPES" || op == "GET-ATTRIBUTES" || op == "GET-OPERATIONS") {
        std::map<std::string, std::vector<std::string>> out;
        for (auto* t : which) {
            std::vector<std::string> xs;
            if (op == "GET-ATTRIBUTES") xs = t->attribute_names();
            if (op == "GET-OPERATIONS") {
                xs = {"READ", "QUERY"};
                for (auto& o : t->operation_names()) xs.push_back(o);
            }
            out[std::string(t->type_name())] = std::move(xs);
        }
        if (r.entity_type.empty())
            out[std::string(node_type)] = op == "GET-OPERATIONS" ? node_operations : std::vector<std::string>{};
        rep.map_of_lists = std::move(out);
        return rep;
    }
    if (op == "GET-MGMT-NODES") {
        rep.list = std::vector<std::string>{}; // every node answers for the cluster: no others to list
        return rep;
    }
    return status_reply(501, "operation '" + op + "' is not a node operation (supported: " + join(node_operations) +
                                 "; entity operations need 'type')");
}

reply management_service::query(merged_type& t, const request& r) {
    auto all = t.query(node_scoped(r));
    if (!all) return error_reply(all.error());
    std::vector<plugins::entity> rows = std::move(*all);
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return name_of(a) < name_of(b); });
    const auto known = t.attribute_names();
    std::vector<std::string> names = r.attribute_names.empty() ? known : r.attribute_names;
    for (const auto& n : names)
        if (std::find(known.begin(), known.end(), n) == known.end())
            return status_reply(400, "'" + n + "' is not an attribute of " + std::string(t.type_name()) +
                                         " (attributes: " + join(known) + ")");
    reply rep;
    rep.names = names;
    rep.rows.emplace();
    const size_t from = std::min(rows.size(), static_cast<size_t>(r.offset));
    const size_t to = r.count ? std::min(rows.size(), from + static_cast<size_t>(*r.count)) : rows.size();
    for (size_t i = from; i < to; ++i) {
        std::vector<plugins::attribute_value> row;
        for (const auto& n : names) {
            auto it = rows[i].find(n);
            row.push_back(it == rows[i].end() ? plugins::attribute_value{} : it->second);
        }
        rep.rows->push_back(std::move(row));
    }
    rep.count = static_cast<int64_t>(rep.rows->size());
    return rep;
}

reply management_service::read(merged_type& t, const request& r) {
    if (r.name.empty()) return status_reply(400, "READ needs the application property 'name' (or 'identity')");
    auto all = t.query(node_scoped(r), &r.name);
    if (!all) return error_reply(all.error());
    for (auto& e : *all) {
        if (name_of(e) != r.name) continue;
        reply rep;
        rep.map = std::move(e);
        return rep;
    }
    return status_reply(404, "no " + std::string(t.type_name()) + " named '" + r.name + "'");
}

} // namespace wharf::management
