// Typed JSON (../CONTRACT.md) to and from Proton C++ values and messages.
//
// Values are walked generically with proton::codec::decoder / encoder, so
// every AMQP type keeps its own type both ways: nothing is guessed from a
// value. A message's fields go through the proton::message accessors.
#pragma once

#include <nlohmann/json.hpp>
#include <proton/message.hpp>
#include <proton/value.hpp>

#include <stdexcept>
#include <string>

namespace wharf::interop {

// ordered_json keeps the order of object keys, as Python's dict does: input
// application properties go on the wire in file order, and the output's
// fields come in the order the Python agent prints them.
using json = nlohmann::ordered_json;

// Something Proton C++ cannot do (exit 3, {"unsupported": what()}).
struct unsupported : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// {"type": T, "value": V} of a value; an empty value (no data) is null.
json to_typed(const proton::value& v);

// A value from {"type": T, "value": V}; throws std::invalid_argument on a
// malformed one.
proton::value from_typed(const json& t);

// The typed JSON of a received message (every field it has).
json from_message(const proton::message& m);

// A message to send from its typed JSON; throws unsupported for what
// Proton C++ cannot send.
proton::message to_message(const json& spec);

} // namespace wharf::interop
