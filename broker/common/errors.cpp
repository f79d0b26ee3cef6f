#include "broker/common/errors.hpp"

namespace wharf {

std::string_view to_condition(errc code) {
    switch (code) {
    case errc::not_found: return "amqp:not-found";
    case errc::not_allowed: return "amqp:not-allowed";
    case errc::resource_limit_exceeded: return "amqp:resource-limit-exceeded";
    case errc::message_size_exceeded: return "amqp:link:message-size-exceeded";
    case errc::transfer_limit_exceeded: return "amqp:link:transfer-limit-exceeded";
    case errc::decode_error: return "amqp:decode-error";
    case errc::invalid_field: return "amqp:invalid-field";
    case errc::not_implemented: return "amqp:not-implemented";
    case errc::detach_forced: return "amqp:link:detach-forced";
    case errc::redirect: return "amqp:link:redirect";
    case errc::connection_forced: return "amqp:connection:forced";
    case errc::internal_error: return "amqp:internal-error";
    }
    return "amqp:internal-error"; // unreachable: every code is handled above
}

} // namespace wharf
