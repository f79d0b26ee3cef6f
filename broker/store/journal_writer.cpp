#include "broker/store/journal_writer.hpp"

#include "broker/store/journal_format.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace wharf::store {

namespace {
constexpr size_t fresh_buffer_bytes = 64 * 1024;
constexpr size_t max_spares = 4;
constexpr size_t max_spare_bytes = 8 * 1024 * 1024; // a larger one is freed, not kept

std::string errno_text(const char* what, const std::string& path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}
void sync_dir(const std::string& dir) {
    int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (d >= 0) {
        ::fsync(d);
        ::close(d);
    }
}
} // namespace

journal_writer::journal_writer(std::string dir, uint32_t segment, uint64_t size)
    : dir_(std::move(dir)), segment_(segment), synced_size_(size), size_(size) {
    thread_ = std::thread([this] { run(); });
}

journal_writer::~journal_writer() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (fd_ >= 0) ::close(fd_);
}

void journal_writer::submit(job&& j) {
    {
        std::lock_guard lock(mu_);
        jobs_.push_back(std::move(j));
    }
    cv_.notify_one();
}

std::string journal_writer::spare() {
    std::string next;
    {
        std::lock_guard lock(mu_);
        if (!spares_.empty()) {
            next = std::move(spares_.back());
            spares_.pop_back();
        }
    }
    if (next.capacity() < fresh_buffer_bytes) next.reserve(fresh_buffer_bytes);
    return next;
}

std::string journal_writer::failure() const {
    std::lock_guard lock(mu_);
    return failure_;
}

void journal_writer::set_synced_callback(engine::message_store::synced_fn fn) {
    std::lock_guard lock(cb_mu_);
    synced_ = std::move(fn);
}

void journal_writer::report(uint64_t epoch, bool ok, const std::string& reason) {
    std::lock_guard lock(cb_mu_);
    if (synced_) synced_(epoch, ok, reason);
}

// Opens `segment` (none is open) at its end. An empty file gets the header,
// which counts as written, not as synced: a failure before the next sync
// cuts it off with the rest, and cut_back() then closes the file so that
// this writes it again. Records never start at offset 0.
//
// A segment this writer has not created yet must not exist: if it does,
// recovery did not read it, and appending would mix its records with ours.
bool journal_writer::open_segment(uint32_t segment, std::string& reason) {
    const std::string path = dir_ + "/" + segment_name(segment);
    int fd = -1;
    if (segment == created_) fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 && (segment != created_ || errno == ENOENT)) {
        fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            reason = "cannot create " + path + ": it exists already, and this node did not recover it; "
                     "refusing to write over it";
            return false;
        }
        if (fd >= 0) created_ = segment;
    }
    if (fd < 0) {
        reason = errno_text("cannot open", path);
        return false;
    }
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) {
        reason = errno_text("cannot seek in", path);
        ::close(fd);
        return false;
    }
    fd_ = fd;
    segment_ = segment;
    size_ = synced_size_ = static_cast<uint64_t>(end);
    if (size_ == 0) {
        tail_dirty_ = true;
        if (!write_all(std::string(segment_magic), reason)) return false;
    }
    sync_dir(dir_);
    return true;
}

// Syncs and closes the open segment, if any.
bool journal_writer::close_segment(std::string& reason) {
    if (fd_ < 0) return true;
    if (::fdatasync(fd_) != 0) {
        reason = errno_text("cannot sync", dir_ + "/" + segment_name(segment_));
        return false;
    }
    synced_size_ = size_;
    tail_dirty_ = false;
    ::close(fd_);
    fd_ = -1;
    return true;
}

// After a failure: cuts segment_ back to its synced size, so that the next
// record follows the last synced one (no half record, no hole). Cut below
// the header, the file is emptied and closed, and the next open writes the
// header again.
bool journal_writer::cut_back(std::string& reason) {
    const std::string path = dir_ + "/" + segment_name(segment_);
    if (fd_ < 0) {
        fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) {
            if (errno != ENOENT) {
                reason = errno_text("cannot open", path);
                return false;
            }
            tail_dirty_ = false; // never created: nothing to cut
            return true;
        }
    }
    const uint64_t keep = synced_size_ < segment_magic.size() ? 0 : synced_size_;
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0 || ::lseek(fd_, static_cast<off_t>(keep), SEEK_SET) < 0) {
        reason = errno_text("cannot cut back", path);
        ::close(fd_); // tail_dirty_ stays: the next attempt cuts first
        fd_ = -1;
        return false;
    }
    size_ = synced_size_ = keep;
    tail_dirty_ = false;
    if (keep == 0) {
        ::close(fd_);
        fd_ = -1;
    }
    return true;
}

bool journal_writer::write_all(const std::string& bytes, std::string& reason) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            reason = errno_text("cannot write", dir_ + "/" + segment_name(segment_));
            return false;
        }
        done += static_cast<size_t>(n);
        size_ += static_cast<uint64_t>(n);
    }
    return true;
}

// One attempt: cut what a failure left, write every unsynced chunk in
// order, sync. `synced` says how many of unsynced_ are on disk afterwards,
// also on failure: a segment synced when the next one was opened.
bool journal_writer::write_and_sync(bool probe, size_t& synced, std::string& reason) {
    synced = 0;
    if (tail_dirty_ && !cut_back(reason)) return false;
    if (probe && unsynced_.empty()) {
        // Nothing kept to write: can we write and sync again?
        std::string noop;
        append_noop(noop);
        seal_records(noop);
        if (fd_ < 0 && !open_segment(segment_, reason)) return false;
        tail_dirty_ = true;
        if (!write_all(noop, reason)) return false;
    }
    for (size_t i = 0; i < unsynced_.size(); ++i) {
        chunk& c = unsynced_[i];
        if (fd_ < 0 || c.segment != segment_) {
            if (c.segment != segment_ && !close_segment(reason)) return false;
            synced = i; // segment numbers only grow: all before i were in synced segments
            if (!open_segment(c.segment, reason)) return false;
        }
        seal_records(c.bytes); // again after a failure: the same checksums
        tail_dirty_ = true;
        if (!write_all(c.bytes, reason)) return false;
    }
    if (fd_ >= 0 && ::fdatasync(fd_) != 0) {
        reason = errno_text("cannot sync", dir_ + "/" + segment_name(segment_));
        return false;
    }
    synced_size_ = size_;
    tail_dirty_ = false;
    synced = unsynced_.size();
    return true;
}

// After a good sync: every segment the store retired goes (a segment must
// not outlive the records that retire it being on disk, nor be forgotten).
void journal_writer::delete_segments() {
    for (uint32_t s : pending_deletes_) {
        if (s == segment_ && fd_ >= 0) {
            ::close(fd_); // synced; the next write opens the new segment
            fd_ = -1;
        }
        ::unlink((dir_ + "/" + segment_name(s)).c_str());
    }
    if (!pending_deletes_.empty()) sync_dir(dir_);
    pending_deletes_.clear();
}

// The first `n` unsynced chunks are on disk: forget them, keeping their
// buffers for spare().
void journal_writer::drop_synced(size_t n) {
    {
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < n; ++i) {
            std::string& bytes = unsynced_[i].bytes;
            if (spares_.size() < max_spares && bytes.capacity() <= max_spare_bytes) {
                bytes.clear();
                spares_.push_back(std::move(bytes));
            }
        }
    }
    unsynced_.erase(unsynced_.begin(), unsynced_.begin() + static_cast<std::ptrdiff_t>(n));
}

void journal_writer::run() {
    std::deque<job> batch;
    for (;;) {
        bool last = false;
        {
            std::unique_lock lock(mu_);
            if (writable_.load()) {
                cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
            } else {
                // Not writable: probe once a second even when nobody writes.
                cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_ || !jobs_.empty(); });
            }
            if (jobs_.empty() && stop_) {
                if (unsynced_.empty() && pending_deletes_.empty() && !tail_dirty_) return;
                last = true; // stopping: one more try at what failed before
            }
            batch.swap(jobs_);
        }
        std::string refused;
        for (auto& j : batch) {
            for (auto& c : j.chunks) unsynced_.push_back(std::move(c));
            pending_deletes_.insert(pending_deletes_.end(), j.deletes.begin(), j.deletes.end());
            if (refused.empty()) refused = std::move(j.refused);
        }
        std::string reason;
        size_t synced = 0;
        const bool ok = write_and_sync(batch.empty(), synced, reason);
        if (ok) {
            delete_segments();
        } else if (tail_dirty_) {
            std::string ignored; // the attempt's reason is the one to report
            cut_back(ignored);   // if this fails, the next attempt cuts first
        }
        drop_synced(synced);
        {
            std::lock_guard lock(mu_);
            failure_ = ok ? std::string() : reason;
        }
        const bool was = writable_.exchange(ok, std::memory_order_acq_rel);
        if (was && !ok)
            spdlog::error("journal: {}; durable messages are refused until a write succeeds", reason);
        else if (!was && ok)
            spdlog::info("journal: writing again in {}", dir_);
        if (!batch.empty()) report(batch.back().epoch, ok && refused.empty(), ok ? refused : reason);
        batch.clear();
        if (last) {
            // Stopping, and the last try failed too: say what the next start
            // will not find, rather than stop as if all were written.
            if (!ok) {
                size_t bytes = 0;
                for (const chunk& c : unsynced_) bytes += c.bytes.size();
                spdlog::error("journal: stopped with {} bytes of records not written to {} ({}): after a "
                              "restart, messages consumed, moved or dead-lettered since the disk failed come "
                              "back where they were (nothing accepted is lost)",
                              bytes, dir_, reason);
            }
            return;
        }
    }
}

} // namespace wharf::store
