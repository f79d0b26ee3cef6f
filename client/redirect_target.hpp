#pragma once
// Parsing what a redirect names: broker URLs the application passes in, and
// the info map of an amqp:link:redirect condition (AMQP 1.0 §2.8.15).
// Pure functions, no Proton I/O; any thread.

#include <proton/error_condition.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace wharf::client {

// Where to connect: a host (IPv6 in brackets) and a port.
struct endpoint {
    std::string scheme = "amqp"; // "amqp" or "amqps"
    std::string host;
    uint16_t port = 5672;

    // "host:port": the key under which the client keeps one connection.
    std::string key() const { return host + ":" + std::to_string(port); }
    // What proton::container::connect() is given.
    std::string url() const { return scheme + "://" + key(); }
};

// "[amqp://|amqps://]HOST[:PORT]" (IPv6 as "[::1]:5672"); the port defaults
// to 5672 (amqps: 5671). nullopt for anything else, with the reason in *why.
std::optional<endpoint> parse_url(const std::string& url, std::string* why = nullptr);

// What a link redirect asks for.
struct redirect_target {
    endpoint where;       // network-host (or hostname) and port
    std::string hostname; // the virtual host to ask for ("hostname"), may be empty
    std::string address;  // the address to attach to there; empty: the same as before
};

// A copy of `e` that owns its info map. Proton C++ 0.37 builds the
// error_condition of link.error() (connection, session, transport alike)
// around the endpoint's own C info data, by reference; one kept after the
// endpoint is freed trips an assertion in Proton-C (pn_class_free). Copy
// conditions you keep beyond the callback with this.
proton::error_condition owned_condition(const proton::error_condition& e);

// True if `e` is an amqp:link:redirect condition.
bool is_link_redirect(const proton::error_condition& e);

// Reads the info map of a link redirect: keys are symbols (strings are
// accepted too); the port may be any integer type or a decimal string.
// nullopt, with the reason in *why, if there is no usable host or port.
std::optional<redirect_target> parse_redirect(const proton::error_condition& e,
                                              std::string* why = nullptr);

} // namespace wharf::client
