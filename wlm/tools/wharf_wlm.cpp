// wharf-wlm: the operator's small command for workload management, until
// AMQP management arrives: show the cluster, move a queue, drain a node.
// It writes requests to the metadata store; the nodes carry them out.
//
//   wharf-wlm --metadata STORE status
//   wharf-wlm --metadata STORE move QUEUE NODE [--wait SECONDS]
//   wharf-wlm --metadata STORE drain NODE | undrain NODE
//
// STORE is the nodes' metadata setting: sqlite:PATH or
// etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
//
// Exit codes: 0 done, 1 refused or timed out (the reason on stderr), 2 bad usage.

#include "wlm/core/cluster_admin.hpp"
#include "wlm/metadata/open_metadata_store.hpp"
#include "broker/common/seconds_option.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <thread>

namespace {

using namespace wharf::wlm;

int refused(const std::string& why) {
    std::cerr << "wharf-wlm: " << why << "\n";
    return 1;
}

int status(metadata_store& store) {
    auto v = read_cluster(store);
    if (!v) return refused(v.error());
    std::cout << "nodes:\n";
    for (const auto& [id, n] : v->nodes)
        std::cout << "  " << id << "  " << n.host << ":" << n.port << "  "
                  << (v->drains.count(id) ? "draining" : std::string(to_string(n.load.st)))
                  << "  queues=" << n.load.queues << " messages=" << n.load.messages
                  << " connections=" << n.load.connections << "\n";
    for (const auto& d : v->drains)
        if (!v->nodes.count(d)) std::cout << "  " << d << "  down (drain requested)\n";
    std::cout << "queues:\n";
    for (const auto& [q, o] : v->owners) {
        std::cout << "  " << q << "  " << o.node << (v->nodes.count(o.node) ? "" : " (down)") << "  epoch "
                  << o.epoch;
        if (o.moving()) std::cout << "  moving to " << o.to;
        std::cout << "  (" << o.reason << ")\n";
    }
    return 0;
}

// Polls the owner record until the move ended (or the deadline passed).
int wait_for_move(metadata_store& store, const std::string& queue, const std::string& target, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
        auto v = read_cluster(store);
        if (!v) return refused(v.error());
        auto o = v->owners.find(queue);
        if (o != v->owners.end() && !o->second.moving()) {
            if (o->second.node == target) {
                std::cout << "queue '" << queue << "' is on node " << target << " (epoch " << o->second.epoch
                          << ")\n";
                return 0;
            }
            return refused("the move ended elsewhere: " + o->second.reason);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // a person waits: polling is fine
    }
    return refused("queue '" + queue + "' is still moving after " + std::to_string(seconds) + " s");
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"wharf-wlm: show and steer the placement of a Wharf cluster's queues", "wharf-wlm"};
    std::string metadata;
    app.add_option("--metadata", metadata, std::string("the cluster's metadata store, ") + metadata_spec_forms)->required();
    app.require_subcommand(1);
    auto* st = app.add_subcommand("status", "the nodes and where every queue is");
    std::string queue, node;
    double wait = 0;
    auto* mv = app.add_subcommand("move", "move a queue to another node (its messages go with it)");
    mv->add_option("queue", queue, "the queue")->required();
    mv->add_option("node", node, "the node to move it to")->required();
    mv->add_option("--wait", wait, "wait up to this many seconds for the move to end")
        ->check(wharf::seconds_check(true));
    auto* dr = app.add_subcommand("drain", "move every queue off a node; it gets no new ones");
    dr->add_option("node", node, "the node")->required();
    auto* un = app.add_subcommand("undrain", "end a node's drain: it takes queues again");
    un->add_option("node", node, "the node")->required();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    // Every command here acts on a cluster that exists: a mistyped SQLite
    // path would be created, and shown as a cluster with nothing in it.
    if (metadata.rfind("sqlite:", 0) == 0 && !std::filesystem::exists(metadata.substr(7))) {
        std::cerr << "wharf-wlm: --metadata " << metadata << ": no such file: no cluster has used it "
                  << "(check the path; nodes create it when they start)\n";
        return 2;
    }
    auto store = open_metadata_store(metadata);
    if (!store) {
        std::cerr << "wharf-wlm: --" << store.error().description << "\n";
        return store.error().code == store_errc::invalid ? 2 : 1;
    }
    metadata_store& s = **store;
    if (st->parsed()) return status(s);
    if (mv->parsed()) {
        auto r = request_move(s, queue, node);
        if (!r) return refused(r.error());
        if (!r->moving())
            std::cout << "queue '" << queue << "': its move is cancelled; it stays on node " << r->node << "\n";
        else
            std::cout << "queue '" << queue << "' is moving from node " << r->node << " to node " << node << "\n";
        return wait > 0 ? wait_for_move(s, queue, node, wait) : 0;
    }
    const bool on = dr->parsed();
    auto r = request_drain(s, node, on);
    if (!r) return refused(r.error());
    std::cout << "node " << node << (on ? (*r ? " drains" : " was already draining")
                                          : (*r ? " takes queues again" : " was not draining"))
              << "\n";
    return 0;
}
