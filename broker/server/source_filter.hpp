#pragma once
// A consumer's source filter (AMQP 1.0 §3.5.3, the filter-set of its
// source): one JMS selector (a described string whose descriptor is the
// symbol "apache.org:selector-filter:string" or the ulong 0x0000468C00000004,
// under whatever name) is applied (broker/amqp/selector.hpp); any other
// filter is refused, because the answer's source, copied from the attach,
// would say it is in place. Any thread.

#include "broker/amqp/selector.hpp"
#include "broker/common/errors.hpp"

#include <proton/codec.h>

#include <memory>
#include <vector>
#include <optional>

namespace wharf::server {

struct source_filter {
    std::shared_ptr<const amqp::selector> selector; // nullptr: none (or blank)
    // Why the attach is refused: amqp:not-implemented for a filter the node
    // does not apply, amqp:invalid-field for a selector that does not parse.
    std::optional<error> refusal;
};

source_filter read_source_filter(pn_data_t* filter);

} // namespace wharf::server
