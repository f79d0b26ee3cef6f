#pragma once
// The wharfctl commands: each turns its arguments into management requests,
// sends them through `call`, and prints the answer (a table, key/value
// lines, or JSON). Errors are exceptions that main turns into exit codes.
//
// Owned by main; the caller's thread. `call` is mgmt_client::call (a fake
// node in tests).

#include "client/management/mgmt_client.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace wharf::ctl {

// The management client and its value tree live in client/management.
using mgmt::datum;
using mgmt::from_amqp;
using mgmt::mgmt_client;
using mgmt::mgmt_reply;
using mgmt::mgmt_request;
using mgmt::parse_argument;
using mgmt::refused;
using mgmt::to_cell;
using mgmt::to_json;
using mgmt::unreachable;

// The node answered with an error status (exit code 1).
struct status_error : std::runtime_error {
    status_error(int status, const std::string& description, std::string hint = "")
        : std::runtime_error(std::to_string(status) + " " + description), status(status), hint(std::move(hint)) {}
    int status;
    std::string hint; // a second line for stderr, or ""
};
// Something the node did not do in time (move --wait; exit code 1).
struct wait_timeout : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Bad command-line input found after parsing (exit code 2).
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class ctl_commands {
  public:
    using call_fn = std::function<mgmt_reply(const mgmt_request&)>;

    // node: who answers ("n1 (127.0.0.1:5672)"), for status's first line.
    ctl_commands(call_fn call, std::string node, bool json, std::ostream& out)
        : call_(std::move(call)), node_(std::move(node)), json_(json), out_(out) {}

    // With a rate window, the queue figures are read twice that far apart,
    // and the table shows messages in and out per second.
    void status(std::chrono::milliseconds rate_window = std::chrono::milliseconds(0));
    void types();
    void query(const std::string& type, const std::vector<std::string>& attrs);
    void read(const std::string& type, const std::string& name);
    // CREATE, UPDATE, DELETE or any other operation of a type; args are `k=v`.
    void entity_operation(const std::string& op, const std::string& type, const std::string& name,
                          const std::vector<std::string>& args);
    void move(const std::string& queue, const std::string& node, std::chrono::milliseconds wait);
    void drain(const std::string& node, bool drain);
    // max_moves: at most that many moves; dry_run: only the plan.
    void rebalance(std::optional<int64_t> max_moves = std::nullopt, bool dry_run = false);

  private:
    mgmt_reply checked(const mgmt_request& r, const std::string& hint = "");
    mgmt_reply node_query(const std::string& type, const std::vector<std::string>& attrs);
    void print_entity(const datum& body);
    // name -> the queue's row of a wharf.queue QUERY (temporary ones left out).
    std::map<std::string, datum> queue_figures();

    call_fn call_;
    std::string node_;
    bool json_;
    std::ostream& out_;
};

// The rows of a QUERY reply body as maps (attribute name -> value).
std::vector<datum> query_rows(const datum& body);

} // namespace wharf::ctl
