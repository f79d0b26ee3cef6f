#include "broker/store/file_io.hpp"

#include <cerrno>
#include <dirent.h>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::store {

namespace {
const char* kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}
std::string not_regular(const std::string& path, mode_t m) {
    return path + " is " + kind_of(m) + ", not a regular file";
}
} // namespace

std::string read_regular_file(const std::string& path, std::string& out, uint64_t max_bytes) {
    out.clear();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return "cannot stat " + path + ": " + std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
    // O_NONBLOCK and O_NOFOLLOW: if the name was swapped for a FIFO or a
    // link after lstat, open neither blocks nor follows it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
    if (::fstat(fd, &st) != 0) {
        const std::string e = std::strerror(errno);
        ::close(fd);
        return "cannot stat " + path + ": " + e;
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return not_regular(path, st.st_mode);
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        return path + " is " + std::to_string(st.st_size) + " bytes, more than it can be (at most " +
               std::to_string(max_bytes) + "): damaged, or not this node's";
    }
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    // A read error or a file that ends early is never taken for the end of
    // the data: recovery would cut or remove what it did not read.
    std::string err;
    while (done < out.size() && err.empty()) {
        const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            err = "cannot read " + path + " at offset " + std::to_string(done) + ": " + std::strerror(errno);
        else if (n == 0)
            err = "cannot read " + path + " at offset " + std::to_string(done) + ": the file ended there, but it "
                  "has " + std::to_string(out.size()) + " bytes (changed while being read?)";
        else
            done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (!err.empty()) out.clear();
    return err;
}

std::string list_names(const std::string& dir, std::vector<std::string>& out) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return "data-dir '" + dir + "': cannot list it: " + std::strerror(errno);
    for (;;) {
        errno = 0;
        const dirent* ent = ::readdir(d);
        if (!ent) {
            const int e = errno;
            ::closedir(d);
            if (e != 0) return "data-dir '" + dir + "': cannot list it: " + std::strerror(e);
            return "";
        }
        out.emplace_back(ent->d_name);
    }
}

} // namespace wharf::store
