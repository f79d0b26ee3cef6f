#pragma once
// The broker's error codes and their one mapping to AMQP 1.0 conditions.
// Every failure a peer can cause ends up as one of these; to_condition() is a
// switch without `default:` so that a new code cannot be left unmapped.

#include <string>
#include <string_view>

namespace wharf {

enum class errc {
    not_found,               // unknown address with auto-create off, deleted queue
    not_allowed,             // an operation the node does not permit here
    resource_limit_exceeded, // queue full (reject policy), too many connections
    message_size_exceeded,   // larger than the link's max-message-size
    transfer_limit_exceeded, // a transfer beyond the link's credit
    decode_error,            // the bytes of a message are not valid AMQP
    invalid_field,           // a field with a value the node cannot accept
    not_implemented,         // a feature the node does not offer
    detach_forced,           // the node ends a link for its own reasons
    redirect,                // the queue is on another node (link redirect)
    connection_forced,       // the node ends a connection (shutdown)
    internal_error,          // a bug or an environment failure on the node
};

// An error with a description a person can act on.
struct error {
    errc code;
    std::string description;
};

// The AMQP condition symbol for `code`, e.g. "amqp:not-found".
std::string_view to_condition(errc code);

} // namespace wharf
