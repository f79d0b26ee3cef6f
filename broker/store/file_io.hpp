#pragma once
// Reading the data directory's files at start (segments, wharf.meta): only
// regular files, opened so that a FIFO or device cannot block the start,
// and every error named with its file. Main thread, at start.

#include <string>

namespace wharf::store {

// Reads the whole of `path` into `out`. Returns "" when done, else what
// went wrong, naming the file: it is not a regular file (a FIFO, a
// directory, a symbolic link, ...), it cannot be opened or stat'ed, a read
// fails, or it ends before its size (each naming the offset).
std::string read_regular_file(const std::string& path, std::string& out);

} // namespace wharf::store
