#include "broker/store/data_dir.hpp"

#include "broker/store/file_io.hpp"
#include "broker/store/journal_format.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
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
    const bool have_meta = ::lstat(meta.c_str(), &st) == 0;
    if (!have_meta && errno != ENOENT) {
        const std::string e = std::strerror(errno);
        ::close(fd);
        return fail("data-dir '" + dir + "': cannot stat " + meta + ": " + e);
    }
    if (have_meta) {
        std::string text;
        if (auto e = read_regular_file(meta, text); !e.empty()) {
            ::close(fd);
            return fail("data-dir '" + dir + "': " + e + "; refusing to start");
        }
        std::istringstream in(text);
        uint32_t format = 0;
        std::string owner, line;
        while (std::getline(in, line)) {
            if (line.rfind("format=", 0) == 0) format = static_cast<uint32_t>(std::strtoul(line.c_str() + 7, nullptr, 10));
            if (line.rfind("node-id=", 0) == 0) owner = line.substr(8);
        }
        if (format != format_version) {
            ::close(fd);
            return fail("data-dir '" + dir + "' holds journal format " + std::to_string(format) +
                        "; this wharfd reads format " + std::to_string(format_version) +
                        ". Refusing to touch it: use another data-dir or the matching wharfd.");
        }
        if (owner != node_id) {
            ::close(fd);
            return fail("data-dir '" + dir + "' belongs to node '" + owner + "', not '" + node_id +
                        "'. Refusing to touch it: start with --node-id " + owner +
                        " or use another data-dir.");
        }
        return fd;
    }
    const std::string tmp = meta + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << "format=" << format_version << "\nnode-id=" << node_id << "\n";
        out.flush();
        if (!out) {
            ::close(fd);
            return fail("data-dir '" + dir + "': cannot write " + tmp + ": " + std::strerror(errno));
        }
    }
    if (std::rename(tmp.c_str(), meta.c_str()) != 0) {
        ::close(fd);
        return fail("data-dir '" + dir + "': cannot create " + meta + ": " + std::strerror(errno));
    }
    return fd;
}

} // namespace wharf::store
