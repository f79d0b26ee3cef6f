// wharfctl: manages a Wharf node or cluster through its AMQP management node
// ($management). See tools/wharfctl/README.md.
//
// Exit codes: 0 ok, 1 the node answered an error (or --wait ran out),
// 2 bad usage, 3 the node cannot be reached (or did not answer in time).
//
// Threads: main; mgmt_client runs a Proton container on a thread of its own.

#include "tools/wharfctl/commands.hpp"
#include "client/management/mgmt_client.hpp"

#include "client/redirect_target.hpp"
#include "broker/common/seconds_option.hpp"

#include <CLI/CLI.hpp>

#include <iostream>

namespace {

using namespace wharf::ctl;
using wharf::seconds_check;

constexpr int exit_ok = 0, exit_status = 1, exit_usage = 2, exit_unreachable = 3;

struct cli_args {
    std::string broker = "127.0.0.1:5672";
    double timeout = 10;
    double rate_window = 1;
    std::optional<int64_t> max_moves;
    bool dry_run = false;
    bool json = false;
    std::string type, name, op, queue, node;
    std::vector<std::string> attrs, args;
    double wait = 0;
};

int fail(int code, const std::string& what, const std::string& hint = "") {
    std::cerr << "wharfctl: " << what << "\n";
    if (!hint.empty()) std::cerr << "wharfctl: " << hint << "\n";
    return code;
}

// Seconds: a number, positive (or zero when zero_ok), at most a day.
CLI::App* command(CLI::App& app, const char* name, const char* what) {
    CLI::App* c = app.add_subcommand(name, what);
    c->fallthrough(); // global options may follow the command
    return c;
}

} // namespace

int main(int argc, char** argv) {
    cli_args a;
    CLI::App app{"wharfctl: manage a Wharf node or cluster through AMQP management ($management)"};
    app.add_option("-b,--broker", a.broker, "Node to ask, HOST:PORT (any node of a cluster)")->capture_default_str();
    app.add_option("--timeout", a.timeout, "Seconds to wait for the connection and for each answer")
        ->check(seconds_check(false))
        ->capture_default_str();
    app.add_flag("--json", a.json, "Print the reply body as JSON (status: nodes and queues as one object)");
    app.require_subcommand(1);

    auto* status = command(app, "status", "The cluster at a glance: nodes and queues (a single node: its queues)");
    status->add_option("--rate-window", a.rate_window, "Seconds between the two readings the in/out rates come from (0: no rates)")
        ->check(CLI::Range(0.0, 60.0))
        ->capture_default_str();
    auto* types = command(app, "types", "Entity types the node knows, their attributes and operations");
    auto* query = command(app, "query", "List the entities of a type (queue, node, owner, wharf.*, ...)");
    query->add_option("type", a.type, "Entity type")->required();
    query->add_option("--attrs", a.attrs, "Only these attributes (comma-separated)")->delimiter(',');
    auto* read = command(app, "read", "Show one entity");
    read->add_option("type", a.type, "Entity type")->required();
    read->add_option("name", a.name, "Entity name")->required();
    std::map<std::string, CLI::App*> entity_ops;
    for (auto [op, what] : {std::pair{"create", "Create an entity with attributes KEY=VALUE"},
                            std::pair{"update", "Change attributes KEY=VALUE of an entity"},
                            std::pair{"delete", "Delete an entity"}}) {
        auto* c = command(app, op, what);
        c->add_option("type", a.type, "Entity type")->required();
        c->add_option("name", a.name, "Entity name")->required();
        if (std::string(op) != "delete")
            c->add_option("attributes", a.args, "KEY=VALUE (true/false/null, integers, \"quoted\" strings)");
        entity_ops[op] = c;
    }
    auto* call = command(app, "call", "Any operation of an entity type: OPERATION TYPE NAME [KEY=VALUE ...]");
    call->add_option("operation", a.op, "Operation, e.g. DRAIN")->required();
    call->add_option("type", a.type, "Entity type")->required();
    call->add_option("name", a.name, "Entity name")->required();
    call->add_option("arguments", a.args, "KEY=VALUE arguments (sent in the body map)");
    auto* move = command(app, "move", "Move a queue (with its messages) to another node");
    move->add_option("queue", a.queue, "Queue name")->required();
    move->add_option("node", a.node, "Target node id")->required();
    move->add_option("--wait", a.wait, "Wait up to SECONDS until the queue is active on NODE")
        ->check(seconds_check(true));
    auto* drain = command(app, "drain", "Drain a node: its queues move to other nodes");
    drain->add_option("node", a.node, "Node id")->required();
    auto* undrain = command(app, "undrain", "Stop draining a node");
    undrain->add_option("node", a.node, "Node id")->required();
    auto* rebalance = command(app, "rebalance", "Ask placement to rebalance the queues (wharf.placement)");
    rebalance->add_option("--max", a.max_moves, "At most this many moves (the node's default: 16)")
        ->check(CLI::Range(1, 1000));
    rebalance->add_flag("--dry-run", a.dry_run, "Only show the moves it would make");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e); // prints help, or the error and a hint
        return code == 0 ? exit_ok : exit_usage;
    }
    std::string why;
    if (!wharf::client::parse_url(a.broker, &why)) return fail(exit_usage, "bad --broker '" + a.broker + "': " + why);
    for (const auto& arg : a.args)
        if (!parse_argument(arg)) return fail(exit_usage, "'" + arg + "' is not KEY=VALUE");

    try {
        mgmt_client mgmt(a.broker, std::chrono::milliseconds(static_cast<int64_t>(a.timeout * 1000)));
        const std::string id = mgmt.node_id();
        ctl_commands cmds([&mgmt](const mgmt_request& r) { return mgmt.call(r); },
                          id.empty() ? a.broker : id + " at " + a.broker, a.json, std::cout);
        if (status->parsed()) cmds.status(std::chrono::milliseconds(static_cast<int64_t>(a.rate_window * 1000)));
        else if (types->parsed()) cmds.types();
        else if (query->parsed()) cmds.query(a.type, a.attrs);
        else if (read->parsed()) cmds.read(a.type, a.name);
        else if (call->parsed()) cmds.entity_operation(a.op, a.type, a.name, a.args);
        else if (move->parsed())
            cmds.move(a.queue, a.node, std::chrono::milliseconds(static_cast<int64_t>(a.wait * 1000)));
        else if (drain->parsed() || undrain->parsed()) cmds.drain(a.node, drain->parsed());
        else if (rebalance->parsed()) cmds.rebalance(a.max_moves, a.dry_run);
        else
            for (const auto& [op, c] : entity_ops)
                if (c->parsed()) {
                    std::string upper = op;
                    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
                    cmds.entity_operation(upper, a.type, a.name, a.args);
                }
        std::cout.flush();
        return exit_ok;
    } catch (const usage_error& e) {
        return fail(exit_usage, e.what());
    } catch (const status_error& e) {
        return fail(exit_status, e.what(), e.hint);
    } catch (const wait_timeout& e) {
        return fail(exit_status, e.what());
    } catch (const refused& e) {
        return fail(exit_status, e.what());
    } catch (const unreachable& e) {
        return fail(exit_unreachable, e.what());
    } catch (const std::exception& e) {
        return fail(exit_status, std::string("unexpected: ") + e.what());
    }
}
