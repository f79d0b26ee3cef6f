#pragma once
// Message annotations that a consumer's `modified` outcome asks the node to
// combine with the message (AMQP 1.0 §3.4.5): an entry whose key the
// message's message-annotations already hold replaces that entry's value,
// the others are added. Everything else in the message stays byte for byte.
//
// Pure functions, no state: safe on any thread.

#include "broker/amqp/message_codec.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace wharf::amqp {

// Why `map` (one encoded AMQP value, as Proton encodes a disposition's
// message-annotations field) is not an annotations map, or nullopt when it
// is: a map or null whose keys are symbols or ulongs (AMQP 1.0 §3.2.10),
// every value well formed.
std::optional<codec_error> check_annotations(std::string_view map);

// How many entries `map` has (it must have passed check_annotations).
size_t annotation_count(std::string_view map);

// `message` with `map`'s entries combined into its message-annotations
// section (made when it has none, in its place after the header and
// delivery-annotations). `info` must come from scan_message(message) and
// `map` must have passed check_annotations.
std::string with_annotations(std::string_view message, const message_info& info, std::string_view map);

} // namespace wharf::amqp
