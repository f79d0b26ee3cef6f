#pragma once
// Test fixtures around real wharfd processes (broker/server/tests'
// wharfd_process): a 2-node cluster on one SQLite metadata file, a single
// node, a raw Proton C++ attach that reports the detach condition (no
// library), and running the wharf-wlm command. Test thread only.

#include "broker/common/testing/free_port.hpp"
#include "broker/common/testing/run_tool.hpp"
#include "broker/server/tests/wharfd_process.hpp"

#include <proton/error_condition.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace wharf::client::test {

using wharf::test_support::free_port;
using wharf::test_support::run_tool;

struct cluster_options {
    // [plugin.wlm] rules; the default pins every queue to n2.
    std::vector<std::string> rules{"* -> node:n2"};
    // n2 advertises a port where nothing listens (its redirects lead nowhere).
    bool n2_unreachable = false;
    // [plugin.wlm] mode: these tests are about following redirects (relay
    // mode would serve every link at the node the client reached).
    std::string mode = "redirect";
};

// Nodes n1 and n2 with the wlm plugin, lease-ttl 1 s, poll-interval 0.05 s.
// Each listens on a port chosen here and advertises it (wharfd_process adds
// a second, OS-chosen listener of its own, which the tests do not use).
class two_node_cluster {
  public:
    explicit two_node_cluster(cluster_options o = {});
    ~two_node_cluster();
    two_node_cluster(const two_node_cluster&) = delete;
    two_node_cluster& operator=(const two_node_cluster&) = delete;

    bool ok() const;                  // both nodes listening
    std::string url(int node) const;  // "127.0.0.1:PORT", node 1 or 2 (advertised port)
    uint16_t port(int node) const;    // the port that node advertises
    std::string metadata() const { return "sqlite:" + dir_ + "/meta.db"; }
    server::test::wharfd_process& process(int node);

  private:
    std::string dir_;
    uint16_t ports_[2] = {0, 0};
    std::unique_ptr<server::test::wharfd_process> nodes_[2];
};

// What a plain Proton C++ client sees when it attaches to `address` at `url`:
// the condition of the detach that answered it (empty if the link opened,
// or "test:timeout" if nothing came within the limit).
proton::error_condition raw_attach(const std::string& url, const std::string& address, bool sender);

} // namespace wharf::client::test
