#pragma once
// Helpers for the store's tests: a temporary directory, a watch on the
// writer's reports, entries, reading back what recovery or a segment file
// holds, and a file-size limit that makes writes fail.

#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <mutex>
#include <sys/resource.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::store::test {

class temp_dir {
  public:
    temp_dir() {
        char tmpl[] = "/tmp/wharf-store-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
    std::string path;
};

// Records what the writer reports; waits for an epoch with a deadline.
struct sync_watch {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t synced = 0;
    bool last_ok = true;
    std::string reason;
    void install(journal_store& s) {
        s.set_synced_callback([this](uint64_t e, bool ok, const std::string& r) {
            std::lock_guard l(mu);
            synced = std::max(synced, e);
            last_ok = ok;
            reason = r;
            cv.notify_all();
        });
    }
    bool wait(uint64_t epoch) {
        std::unique_lock l(mu);
        return cv.wait_for(l, std::chrono::seconds(10), [&] { return synced >= epoch; });
    }
};

inline engine::queue_entry entry(uint64_t seq, const std::string& body, uint32_t dc = 0) {
    engine::queue_entry e;
    e.seq = seq;
    e.body = engine::message_ref::copy_of(body);
    e.delivery_count = dc;
    e.durable = e.persistent = true;
    return e;
}

inline std::unique_ptr<journal_store> open_ok(const journal_options& o, recovery_report& r) {
    auto s = journal_store::open(o, r);
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
    return s ? std::move(s.value()) : nullptr;
}

// A store opened on `o` (its recovery must succeed), its syncs watched.
// (The store goes first, so its last sync finds the watch.)
struct watched_store {
    explicit watched_store(const journal_options& o) : s(open_ok(o, report)) {
        if (s) w.install(*s);
    }
    recovery_report report;
    sync_watch w;
    std::unique_ptr<journal_store> s;
};

inline std::vector<std::string> bodies(const std::vector<engine::queue_entry>& es) {
    std::vector<std::string> out;
    for (auto& e : es) out.emplace_back(e.body.bytes());
    return out;
}

inline std::vector<uint64_t> seqs(const std::vector<engine::queue_entry>& es) {
    std::vector<uint64_t> out;
    for (auto& e : es) out.push_back(e.seq);
    return out;
}

inline const std::vector<engine::queue_entry>* queue_of(const recovery_report& r, const std::string& name) {
    for (auto& [n, es] : r.queues)
        if (n == name) return &es;
    return nullptr;
}

inline uint64_t file_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

inline uint64_t dir_bytes(const std::string& dir) {
    uint64_t total = 0;
    DIR* d = ::opendir(dir.c_str());
    while (dirent* e = ::readdir(d)) {
        struct stat st {};
        if (::stat((dir + "/" + e->d_name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
    }
    ::closedir(d);
    return total;
}

// The records of a segment file, in order, as (type, seq); empty when the
// file does not start with the header. A record that does not read stops
// the list.
inline std::vector<std::pair<record_type, uint64_t>> records_in(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string data = ss.str();
    std::vector<std::pair<record_type, uint64_t>> out;
    if (data.compare(0, segment_magic.size(), segment_magic) != 0) return out;
    size_t pos = segment_magic.size();
    record r;
    while (read_record(data, pos, r) == read_status::ok) out.emplace_back(r.type, r.seq);
    return out;
}

// While alive, no file of this process may grow past `bytes` (SIGXFSZ
// ignored, so that the write fails with EFBIG instead of killing us).
// lift() or the destructor restores the limit.
class file_size_limit {
  public:
    explicit file_size_limit(uint64_t bytes) {
        old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
        EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &old_), 0);
        rlimit l = old_;
        l.rlim_cur = static_cast<rlim_t>(bytes);
        EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &l), 0);
    }
    void lift() {
        if (lifted_) return;
        EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &old_), 0);
        lifted_ = true;
    }
    ~file_size_limit() {
        lift();
        std::signal(SIGXFSZ, old_handler_);
    }
    file_size_limit(const file_size_limit&) = delete;
    file_size_limit& operator=(const file_size_limit&) = delete;

  private:
    rlimit old_{};
    void (*old_handler_)(int) = SIG_DFL;
    bool lifted_ = false;
};

} // namespace wharf::store::test
