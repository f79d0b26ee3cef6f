#include "tools/wharfctl/commands.hpp"

#include "tools/wharfctl/table.hpp"

#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

namespace wharf::ctl {

namespace {

constexpr const char* node_type = "org.amqp.management";
constexpr auto poll_interval = std::chrono::milliseconds(100);

mgmt_request operation(const std::string& op, const std::string& type, const std::string& name = "") {
    mgmt_request r;
    r.properties = {{"operation", proton::scalar(op)}, {"type", proton::scalar(type)}};
    if (!name.empty()) r.properties.emplace_back("name", proton::scalar(name));
    return r;
}

std::string cell(const datum& row, const std::string& key) {
    const datum* d = row.find(key);
    return d ? to_cell(*d) : "-";
}

bool is_true(const datum* d) { return d && std::holds_alternative<bool>(d->v) && std::get<bool>(d->v); }

datum::map object(std::initializer_list<std::pair<std::string, datum>> xs) { return datum::map(xs); }

// An owner entity's epoch (0 if it has none).
uint64_t epoch_of(const datum& owner) {
    const std::string e = cell(owner, "epoch");
    uint64_t n = 0;
    std::from_chars(e.data(), e.data() + e.size(), n);
    return n;
}

std::string owner_state(const datum& owner) {
    if (cell(owner, "nodeState") == "down") return "owner down";
    if (cell(owner, "state") == "moving") return "moving to " + cell(owner, "to");
    return cell(owner, "state");
}

std::string seconds_text(std::chrono::milliseconds t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(t.count()) / 1000.0);
    return buf;
}

} // namespace

std::vector<datum> query_rows(const datum& body) {
    std::vector<datum> out;
    const datum* names = body.find("attributeNames");
    const datum* results = body.find("results");
    if (names == nullptr || results == nullptr || !names->as_list() || !results->as_list()) return out;
    for (const auto& row : *results->as_list()) {
        datum::map m;
        const datum::list* cells = row.as_list();
        for (size_t i = 0; i < names->as_list()->size(); ++i) {
            const std::string* key = (*names->as_list())[i].as_string();
            if (key == nullptr) continue;
            m.emplace_back(*key, cells && i < cells->size() ? (*cells)[i] : datum{});
        }
        out.push_back(datum{std::move(m)});
    }
    return out;
}

mgmt_reply ctl_commands::checked(const mgmt_request& r, const std::string& hint) {
    mgmt_reply rep = call_(r);
    if (!rep.ok()) throw status_error(rep.status, rep.description, hint);
    return rep;
}

mgmt_reply ctl_commands::node_query(const std::string& type, const std::vector<std::string>& attrs) {
    mgmt_request r = operation("QUERY", node_type);
    r.properties.emplace_back("entityType", proton::scalar(type));
    std::map<std::string, proton::value> body;
    body["attributeNames"] = std::vector<proton::value>(attrs.begin(), attrs.end());
    r.body = body;
    return call_(r);
}

void ctl_commands::print_entity(const datum& body) {
    if (json_) {
        out_ << to_json(body, true) << "\n";
        return;
    }
    if (const datum::map* m = body.as_map()) {
        std::vector<std::pair<std::string, std::string>> pairs;
        for (const auto& [k, v] : *m) pairs.emplace_back(k, to_cell(v));
        out_ << format_pairs(pairs);
    } else if (!body.is_null()) {
        out_ << to_cell(body) << "\n";
    }
}

std::map<std::string, datum> ctl_commands::queue_figures() {
    const mgmt_reply queues = node_query("wharf.queue", {});
    if (!queues.ok()) throw status_error(queues.status, queues.description);
    std::map<std::string, datum> out;
    for (auto& q : query_rows(queues.body))
        if (!is_true(q.find("temporary"))) out[cell(q, "name")] = q; // our own reply queue among them
    return out;
}

namespace {
// Messages per second into and out of (acknowledged from) each queue
// between two readings `window` apart (the time between the starts of the
// two readings, as measured); "-" where a reading lacks figures or the
// queue's owner changed between them (the counts are the owner's).
struct queue_rates {
    std::map<std::string, std::pair<std::string, std::string>> by_queue;
    std::pair<std::string, std::string> of(const std::string& q) const {
        auto it = by_queue.find(q);
        return it == by_queue.end() ? std::pair<std::string, std::string>{"-", "-"} : it->second;
    }
};

queue_rates rates_between(const std::map<std::string, datum>& before, const std::map<std::string, datum>& after,
                          std::chrono::milliseconds window) {
    queue_rates out;
    const double secs = std::chrono::duration<double>(window).count();
    auto per_second = [&](const datum& a, const datum& b, const char* key) -> std::string {
        const datum* x = a.find(key);
        const datum* y = b.find(key);
        if (x == nullptr || y == nullptr || !x->as_int() || !y->as_int()) return "-"; // no figures
        const int64_t from = x->as_int().value_or(0), to = y->as_int().value_or(0);
        if (to < from) return "-"; // the queue was made anew meanwhile
        const datum* na = a.find("node");
        const datum* nb = b.find("node");
        if (na != nullptr && nb != nullptr && na->as_string() && nb->as_string() &&
            *na->as_string() != *nb->as_string())
            return "-"; // moved: the new owner counts from its own start
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(to - from) / secs);
        return buf;
    };
    for (const auto& [name, b] : after) {
        auto a = before.find(name);
        if (a == before.end()) continue;
        out.by_queue[name] = {per_second(a->second, b, "enqueued"), per_second(a->second, b, "acknowledged")};
    }
    return out;
}
} // namespace

void ctl_commands::status(std::chrono::milliseconds rate_window) {
    const mgmt_reply nodes = node_query("wharf.node", {});
    const bool with_rates = rate_window.count() > 0;
    auto figures = [&] {
        const auto started = std::chrono::steady_clock::now();
        auto first = queue_figures();
        if (!with_rates) return std::pair{first, queue_rates{}};
        std::this_thread::sleep_until(started + rate_window); // the rates' sampling window
        const auto again = std::chrono::steady_clock::now();
        auto second = queue_figures();
        auto rates = rates_between(first, second,
                                   std::chrono::duration_cast<std::chrono::milliseconds>(again - started));
        return std::pair{std::move(second), std::move(rates)};
    };
    if (nodes.status == 404) { // no wlm plugin: a single node
        const auto [queues, rates] = figures();
        datum::list json_rows;
        std::vector<std::vector<std::string>> rows;
        for (const auto& [name, q] : queues) {
            datum::map row = *q.as_map();
            const auto [in, out] = rates.of(name);
            if (with_rates) {
                row.emplace_back("inPerSecond", in == "-" ? datum{} : datum{int64_t{std::stoll(in)}});
                row.emplace_back("outPerSecond", out == "-" ? datum{} : datum{int64_t{std::stoll(out)}});
            }
            json_rows.push_back(datum{std::move(row)});
            rows.push_back({name, cell(q, "depth"), cell(q, "bytes"), cell(q, "consumers"), cell(q, "enqueued"),
                            cell(q, "delivered")});
            if (with_rates) {
                rows.back().push_back(in);
                rows.back().push_back(out);
            }
        }
        if (json_) {
            out_ << to_json(datum{object({{"node", {node_}}, {"cluster", {false}}, {"queues", {json_rows}}})}, true)
                 << "\n";
            return;
        }
        out_ << "node " << node_ << ": a single node (no cluster: wharf.node is unknown here)\n\n";
        std::vector<std::string> header = {"QUEUE", "DEPTH", "BYTES", "CONSUMERS", "ENQUEUED", "DELIVERED"};
        if (with_rates) header.insert(header.end(), {"IN/S", "OUT/S"});
        out_ << format_table(header, rows);
        return;
    }
    if (!nodes.ok()) throw status_error(nodes.status, nodes.description);
    const mgmt_reply owners = node_query("wharf.owner", {});
    if (!owners.ok()) throw status_error(owners.status, owners.description);
    const auto [held, rates] = figures(); // every queue's figures, as its owner counts them

    datum::list node_json, queue_json;
    std::vector<std::vector<std::string>> node_rows, queue_rows;
    for (const auto& n : query_rows(nodes.body)) {
        node_json.push_back(n);
        const std::string address = n.find("host") ? cell(n, "host") + ":" + cell(n, "port") : "-";
        node_rows.push_back({cell(n, "name"), address, cell(n, "state"), cell(n, "queues"), cell(n, "messages"),
                             cell(n, "connections")});
    }
    // A down node also shows through the queues it owns (nodes that answer
    // from before wharf.node listed down members do not list it).
    std::set<std::string> listed;
    for (const auto& r : node_rows) listed.insert(r[0]);
    for (const auto& o : query_rows(owners.body)) {
        const std::string id = cell(o, "node");
        if (cell(o, "nodeState") != "down" || !listed.insert(id).second) continue;
        node_json.push_back(datum{object({{"name", {id}}, {"state", {std::string("down")}}})});
        node_rows.push_back({id, "-", "down", "-", "-", "-"});
    }
    bool missing_figures = false;
    for (const auto& o : query_rows(owners.body)) {
        const std::string name = cell(o, "name");
        auto h = held.find(name);
        const std::string depth = h == held.end() ? "-" : cell(h->second, "depth");
        missing_figures = missing_figures || depth == "-";
        queue_rows.push_back({name, cell(o, "node"), owner_state(o), depth});
        datum::map q = *o.as_map();
        q.emplace_back("depth", h == held.end() ? datum{} : (h->second.find("depth") ? *h->second.find("depth")
                                                                                    : datum{}));
        if (with_rates) {
            const auto [in, out] = rates.of(name);
            queue_rows.back().push_back(in);
            queue_rows.back().push_back(out);
            q.emplace_back("inPerSecond", in == "-" ? datum{} : datum{int64_t{std::stoll(in)}});
            q.emplace_back("outPerSecond", out == "-" ? datum{} : datum{int64_t{std::stoll(out)}});
        }
        queue_json.push_back(datum{std::move(q)});
    }
    if (json_) {
        out_ << to_json(datum{object({{"node", {node_}},
                                      {"cluster", {true}},
                                      {"nodes", {node_json}},
                                      {"queues", {queue_json}}})},
                        true)
             << "\n";
        return;
    }
    out_ << "cluster of " << node_rows.size() << " node" << (node_rows.size() == 1 ? "" : "s") << ", answered by "
         << node_ << "\n\n";
    out_ << format_table({"NODE", "ADDRESS", "STATE", "QUEUES", "MESSAGES", "CONNECTIONS"}, node_rows) << "\n";
    std::vector<std::string> header = {"QUEUE", "OWNER", "STATE", "DEPTH"};
    if (with_rates) header.insert(header.end(), {"IN/S", "OUT/S"});
    out_ << format_table(header, queue_rows);
    if (missing_figures) out_ << "(-: no figures; the owner is down or did not answer)\n";
}

void ctl_commands::types() {
    const mgmt_reply attrs = checked(operation("GET-ATTRIBUTES", node_type));
    const mgmt_reply ops = checked(operation("GET-OPERATIONS", node_type));
    datum::map out;
    std::vector<std::vector<std::string>> rows;
    if (const datum::map* m = attrs.body.as_map()) {
        for (const auto& [type, names] : *m) {
            if (type == node_type) continue;
            const datum* o = ops.body.find(type);
            out.emplace_back(type, datum{object({{"attributes", names}, {"operations", o ? *o : datum{}}})});
            rows.push_back({type, to_cell(names), o ? to_cell(*o) : "-"});
        }
    }
    if (json_) out_ << to_json(datum{std::move(out)}, true) << "\n";
    else out_ << format_table({"TYPE", "ATTRIBUTES", "OPERATIONS"}, rows);
}

void ctl_commands::query(const std::string& type, const std::vector<std::string>& attrs) {
    const mgmt_reply rep = node_query(type, attrs);
    if (!rep.ok()) throw status_error(rep.status, rep.description);
    if (json_) {
        out_ << to_json(rep.body, true) << "\n";
        return;
    }
    std::vector<std::string> header;
    if (const datum* names = rep.body.find("attributeNames"); names && names->as_list())
        for (const auto& n : *names->as_list()) header.push_back(to_cell(n));
    std::vector<std::vector<std::string>> rows;
    if (const datum* results = rep.body.find("results"); results && results->as_list())
        for (const auto& r : *results->as_list()) {
            rows.emplace_back();
            if (const datum::list* cells = r.as_list())
                for (const auto& c : *cells) rows.back().push_back(to_cell(c));
        }
    out_ << format_table(header, rows);
}

void ctl_commands::read(const std::string& type, const std::string& name) {
    print_entity(checked(operation("READ", type, name)).body);
}

void ctl_commands::entity_operation(const std::string& op, const std::string& type, const std::string& name,
                                    const std::vector<std::string>& args) {
    mgmt_request r = operation(op, type, name);
    if (!args.empty()) {
        std::map<std::string, proton::value> body;
        for (const auto& a : args) {
            auto kv = parse_argument(a);
            if (!kv) throw usage_error("'" + a + "' is not KEY=VALUE");
            body[kv->first] = kv->second;
        }
        r.body = body;
    }
    const mgmt_reply rep = checked(r);
    if (rep.body.is_null() && !json_) out_ << rep.status << " " << rep.description << ": " << type << " '" << name << "'\n";
    else print_entity(rep.body);
}

void ctl_commands::move(const std::string& queue, const std::string& node, std::chrono::milliseconds wait) {
    mgmt_request r = operation("MOVE", "wharf.owner", queue);
    r.body = std::map<std::string, proton::value>{{"node", node}};
    const mgmt_reply moved = checked(r);
    if (wait.count() == 0) {
        if (json_) print_entity(moved.body);
        else if (cell(moved.body, "node") == node) // a move back to the owner cancels the one under way
            out_ << "queue '" << queue << "': its move is cancelled; it stays on " << node << "\n";
        else out_ << "queue '" << queue << "' is moving from " << cell(moved.body, "node") << " to " << node << "\n";
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
        const mgmt_reply now = checked(operation("READ", "wharf.owner", queue));
        if (cell(now.body, "node") == node && cell(now.body, "state") == "active") {
            if (json_) print_entity(now.body);
            else out_ << "queue '" << queue << "' is on " << node << " (epoch " << cell(now.body, "epoch") << ")\n";
            return;
        }
        // Active elsewhere in a later epoch than the move's: it was abandoned
        // (the target refused a message for good) or cancelled, and waiting
        // longer changes nothing. (An earlier epoch is a node's view from
        // before the move.)
        if (cell(now.body, "state") == "active" && epoch_of(now.body) > epoch_of(moved.body))
            throw refused("the move of queue '" + queue + "' to " + node + " ended on " + cell(now.body, "node") +
                          ": " + cell(now.body, "reason"));
        if (std::chrono::steady_clock::now() >= deadline)
            throw wait_timeout("queue '" + queue + "' is not on " + node + " after " +
                               seconds_text(wait) + " (owner " +
                               cell(now.body, "node") + ", " + owner_state(now.body) + ")");
        std::this_thread::sleep_for(poll_interval);
    }
}

void ctl_commands::drain(const std::string& node, bool drain) {
    const mgmt_reply rep = checked(operation(drain ? "DRAIN" : "UNDRAIN", "wharf.node", node));
    if (json_) {
        print_entity(rep.body);
        return;
    }
    const bool changed = !rep.body.find("changed") || is_true(rep.body.find("changed"));
    if (drain) out_ << node << (changed ? " is draining: its queues move to other nodes\n" : " was already draining\n");
    else out_ << node << (changed ? " is no longer draining\n" : " was not draining\n");
}

void ctl_commands::rebalance(std::optional<int64_t> max_moves, bool dry_run) {
    // A type-level operation; the service wants a name for every entity operation.
    mgmt_request r = operation("REBALANCE", "wharf.placement", "self");
    std::map<std::string, proton::value> args;
    if (max_moves) args["max"] = *max_moves;
    if (dry_run) args["dryRun"] = true;
    if (!args.empty()) r.body = proton::value(args);
    const mgmt_reply rep = call_(r);
    if (rep.status == 404 || rep.status == 501)
        throw status_error(rep.status, rep.description,
                           "this node cannot rebalance: it has no REBALANCE operation on wharf.placement "
                           "(needs a wharfd whose wlm plugin offers it)");
    if (!rep.ok()) throw status_error(rep.status, rep.description);
    if (rep.body.is_null() && !json_) out_ << rep.status << " " << rep.description << "\n";
    else print_entity(rep.body);
}

} // namespace wharf::ctl
