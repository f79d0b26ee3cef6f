#pragma once
// The data directory's identity: `wharf.meta` names the format version and
// the node id that owns the directory, and `LOCK` (flock) keeps a second
// process out. Main thread, at start.

#include "broker/common/result.hpp"

#include <string>

namespace wharf::store {

// Creates `dir` if needed, takes its lock (kept until the process exits:
// the returned descriptor), and checks wharf.meta, or writes it (synced)
// in a directory without segments. An empty or unparsable wharf.meta, or
// segments without one, are errors. Errors say which directory, whose it
// is and what to do.
result<int, std::string> claim_data_dir(const std::string& dir, const std::string& node_id);

} // namespace wharf::store
