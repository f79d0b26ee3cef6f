#pragma once
// Reading the data directory's files at start (segments, wharf.meta): only
// regular files, opened so that a FIFO or device cannot block the start,
// and every error named with its file. Main thread, at start.

#include <cstdint>
#include <string>
#include <vector>

namespace wharf::store {

// Reads the whole of `path` into `out`. Returns "" when done, else what
// went wrong, naming the file: it is not a regular file (a FIFO, a
// directory, a symbolic link, ...), it cannot be opened or stat'ed, a read
// fails, or it ends before its size (each naming the offset).
// A file over `max_bytes` is refused before anything is allocated for it.
std::string read_regular_file(const std::string& path, std::string& out, uint64_t max_bytes);

// The names in directory `dir` (with "." and ".."), into `out`. Returns ""
// when done, else what went wrong ("data-dir 'DIR': cannot list it: ..."):
// a listing cut short would look like a directory with fewer files.
std::string list_names(const std::string& dir, std::vector<std::string>& out);

} // namespace wharf::store
