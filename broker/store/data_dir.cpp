#include "broker/store/data_dir.hpp"

#include "broker/store/file_io.hpp"
#include "broker/store/journal_format.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::store {

namespace {
bool make_dirs(const std::string& dir) {
    std::string path;
    std::stringstream ss(dir);
    std::string part;
    if (!dir.empty() && dir[0] == '/') path = "/";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        path += part + "/";
        if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
    return true;
}

// wharf.meta is two short lines; a node id is at most a few hundred bytes.
constexpr uint64_t max_meta_bytes = 64 * 1024;

// Whether `text` (wharf.meta) names this format and this node: "" if so,
// else the error.
std::string check_meta(const std::string& dir, const std::string& meta, const std::string& text,
                       const std::string& node_id) {
    std::istringstream in(text);
    std::string format, owner, line;
    bool has_format = false, has_owner = false;
    while (std::getline(in, line)) {
        if (line.rfind("format=", 0) == 0) has_format = true, format = line.substr(7);
        if (line.rfind("node-id=", 0) == 0) has_owner = true, owner = line.substr(8);
    }
    const bool number = !format.empty() && format.size() <= 9 &&
                        format.find_first_not_of("0123456789") == std::string::npos;
    if (!number || !has_owner || owner.empty()) {
        const std::string what = text.empty() ? "it is empty"
                                 : !has_format ? "it has no format= line"
                                 : !number     ? "its format '" + format + "' is not a number"
                                               : "it names no node (node-id=)";
        return "data-dir '" + dir + "': " + meta + " is damaged: " + what +
               ". Refusing to start. It should hold two lines, format=" + std::to_string(format_version) +
               " and node-id=<the node that owns the directory>: restore it from a backup, or write "
               "those two lines if you know whose directory it is";
    }
    const auto v = static_cast<uint32_t>(std::stoul(format));
    if (v != format_version)
        return "data-dir '" + dir + "' holds journal format " + std::to_string(v) + "; this wharfd reads format " +
               std::to_string(format_version) + ". Refusing to touch it: use another data-dir or the matching wharfd.";
    if (owner != node_id)
        return "data-dir '" + dir + "' belongs to node '" + owner + "', not '" + node_id +
               "'. Refusing to touch it: start with --node-id " + owner + " or use another data-dir.";
    return {};
}

// A new directory's wharf.meta, written whole and synced (file and
// directory) before the node uses the directory. A directory that already
// holds segments but no wharf.meta is not adopted: its owner is unknown.
std::string create_meta(const std::string& dir, const std::string& meta, const std::string& node_id) {
    std::vector<std::string> names;
    if (auto err = list_names(dir, names); !err.empty()) return err;
    std::string segment;
    for (const std::string& name : names)
        if (segment.empty() && looks_like_segment(name)) segment = name;
    if (!segment.empty())
        return "data-dir '" + dir + "' holds journal segments (" + dir + "/" + segment +
               ") but no wharf.meta, so whose they are is unknown. Refusing to start as node '" + node_id +
               "' on them: if they are this node's, restore wharf.meta (two lines: format=" +
               std::to_string(format_version) + " and node-id=" + node_id +
               "); otherwise use another data-dir";
    const std::string tmp = meta + ".tmp";
    const std::string text = "format=" + std::to_string(format_version) + "\nnode-id=" + node_id + "\n";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return "data-dir '" + dir + "': cannot write " + tmp + ": " + std::strerror(errno);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    const int e = errno;
    ::close(fd);
    if (!written) return "data-dir '" + dir + "': cannot write " + tmp + ": " + std::strerror(e ? e : ENOSPC);
    if (std::rename(tmp.c_str(), meta.c_str()) != 0)
        return "data-dir '" + dir + "': cannot create " + meta + ": " + std::strerror(errno);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
        const std::string why = std::strerror(errno);
        if (dfd >= 0) ::close(dfd);
        return "data-dir '" + dir + "': cannot sync it after creating " + meta + ": " + why;
    }
    ::close(dfd);
    return {};
}
} // namespace

result<int, std::string> claim_data_dir(const std::string& dir, const std::string& node_id) {
    if (!make_dirs(dir))
        return fail("data-dir '" + dir + "': cannot create it: " + std::strerror(errno));
    const std::string lock_path = dir + "/LOCK";
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail("data-dir '" + dir + "': cannot open " + lock_path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return fail("data-dir '" + dir + "' is in use by another wharfd process");
    }
    const std::string meta = dir + "/wharf.meta";
    struct stat st {};
    std::string err;
    if (::lstat(meta.c_str(), &st) == 0) {
        std::string text;
        err = read_regular_file(meta, text, max_meta_bytes);
        if (!err.empty()) err = "data-dir '" + dir + "': " + err + "; refusing to start";
        else err = check_meta(dir, meta, text, node_id);
    } else if (errno != ENOENT) {
        err = "data-dir '" + dir + "': cannot stat " + meta + ": " + std::strerror(errno);
    } else {
        err = create_meta(dir, meta, node_id);
    }
    if (!err.empty()) {
        ::close(fd);
        return fail(err);
    }
    return fd;
}

} // namespace wharf::store
