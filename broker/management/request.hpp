#pragma once
// One AMQP management request (OASIS AMQP Management, working draft 11) and
// its reply, as Proton-C messages. Decoding checks the shape a request must
// have and says what is wrong; nothing here touches the node.
//
// Threads: any one at a time per object.

#include "broker/common/errors.hpp"
#include "broker/common/result.hpp"
#include "plugins/api/plugin.hpp"

#include <proton/message.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::management {

struct message_deleter {
    void operator()(pn_message_t* m) const { pn_message_free(m); }
};
using message_ptr = std::unique_ptr<pn_message_t, message_deleter>;

struct request {
    message_ptr msg;                    // the request as received (its id becomes the reply's correlation-id)
    std::string reply_to;
    std::string operation;
    std::string type;                   // "" when absent
    std::string name;                   // or identity
    std::string entity_type;            // QUERY: entityType (or type)
    int64_t offset = 0;
    std::optional<int64_t> count;
    std::vector<std::string> attribute_names; // QUERY body: attributeNames
    plugins::entity args;               // the body map's scalar entries, then application properties
    std::vector<std::string> property_only; // keys of args that only the application properties set
    bool body_is_map = false;
    std::optional<error> problem;       // a malformed request that can still be answered (400)
};

// Reads a request's bytes. Without a reply-to there is nowhere to answer:
// that is the one failure the sender hears of as a rejected delivery.
result<request, error> decode_request(std::string_view bytes);

// A reply: status code and description, and a body (a map, a list of lists
// for QUERY, or nothing).
struct reply {
    int status = 200;
    std::string description = "OK";
    // body: exactly one of these, or neither
    std::optional<plugins::entity> map;
    std::optional<std::vector<std::string>> names;                  // QUERY attributeNames
    std::optional<std::vector<std::vector<plugins::attribute_value>>> rows; // QUERY results
    std::optional<std::vector<std::string>> list;                   // e.g. GET-MGMT-NODES
    std::optional<std::map<std::string, std::vector<std::string>>> map_of_lists; // GET-TYPES ...
    std::optional<int64_t> count;       // QUERY: rows in this page
};

reply status_reply(int status, std::string description);
reply error_reply(const error& e);     // the status for the error code
// The reply's encoded message: correlation-id from the request's
// message-id (or its correlation-id when it has none), pre-settled by the
// sender.
std::string encode_reply(const request& req, const reply& rep);

} // namespace wharf::management
