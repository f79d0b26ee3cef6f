#pragma once
// mgmt_client: a blocking client of a node's `$management` node (AMQP
// management, the OASIS working draft the broker implements). It opens a
// temporary (dynamic) receiver for replies and a sender to `$management`
// through wharf_client, so an amqp:link:redirect is followed; call() sends
// one request and waits for the reply that carries its message-id as
// correlation-id.
//
// Owned by main. A Proton container runs on a thread of its own; call() and
// the constructor wait on the caller's thread, each up to the timeout.
// Failures are exceptions on the caller's thread (never in a Proton
// callback): `unreachable` when there is no working connection or no
// answer in time, `refused` when the node refuses the links or rejects a
// request (call() then throws at once, with the node's condition).

#include "client/management/datum.hpp"

#include <proton/scalar.hpp>
#include <proton/value.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace wharf::mgmt {

struct unreachable : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct refused : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct mgmt_request {
    std::vector<std::pair<std::string, proton::scalar>> properties; // operation, type, name, ...
    std::optional<proton::value> body;
};

struct mgmt_reply {
    int status = 0;
    std::string description;
    std::optional<int64_t> count; // QUERY: rows in this page
    datum body;
    bool ok() const { return status >= 200 && status < 300; }
};

class mgmt_client {
  public:
    // Connects to `broker` (HOST:PORT) and opens the links; throws
    // unreachable or refused.
    mgmt_client(const std::string& broker, std::chrono::milliseconds timeout);
    ~mgmt_client();
    mgmt_client(const mgmt_client&) = delete;
    mgmt_client& operator=(const mgmt_client&) = delete;

    mgmt_reply call(const mgmt_request& r);
    // How long call() waits for an answer from now on.
    void timeout(std::chrono::milliseconds t) { timeout_ = t; }
    // The node's container id (its node id for wharfd), "" if unknown.
    std::string node_id() const;
    const std::string& broker() const { return broker_; }

  private:
    struct impl;
    std::string broker_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<impl> impl_;
};

} // namespace wharf::mgmt
