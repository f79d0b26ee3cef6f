#pragma once
// Limits every layer checks the same way (config, management, plugins, the
// queue engine, the journal).

#include <cstddef>

namespace wharf {

// The longest queue name, in bytes: the journal keeps a name's length in 16
// bits (broker/store/journal_format.hpp asserts the two agree). A longer
// address or name is refused with amqp:invalid-field, or at start.
inline constexpr size_t max_queue_name = 65535;

} // namespace wharf
