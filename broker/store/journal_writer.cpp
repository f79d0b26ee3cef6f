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

bool journal_writer::open_segment(uint32_t segment, std::string& reason) {
    if (fd_ >= 0 && segment == segment_) return true;
    if (fd_ >= 0) {
        if (::fdatasync(fd_) != 0) {
            reason = errno_text("cannot sync", dir_ + "/" + segment_name(segment_));
            return false;
        }
        ::close(fd_);
        fd_ = -1;
    }
    const std::string path = dir_ + "/" + segment_name(segment);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        reason = errno_text("cannot open", path);
        return false;
    }
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    segment_ = segment;
    size_ = synced_size_ = end < 0 ? 0 : static_cast<uint64_t>(end);
    if (size_ == 0) {
        if (!write_all(std::string(segment_magic), reason)) return false;
    }
    sync_dir(dir_);
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

bool journal_writer::write_job(job& j, std::string& reason) {
    for (auto& c : j.chunks) {
        if (!open_segment(c.segment, reason)) return false;
        seal_records(c.bytes);
        if (!write_all(c.bytes, reason)) return false;
    }
    return true;
}

void journal_writer::run() {
    std::deque<job> batch;
    for (;;) {
        {
            std::unique_lock lock(mu_);
            if (writable_.load()) {
                cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
            } else {
                // Not writable: probe once a second even when nobody writes.
                cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_ || !jobs_.empty(); });
            }
            if (jobs_.empty() && stop_) return;
            batch.swap(jobs_);
        }
        std::string reason;
        std::string refused;
        for (auto& j : batch)
            if (refused.empty()) refused = std::move(j.refused);
        bool ok = true;
        if (batch.empty()) {
            // A probe: can we write and sync again?
            std::string probe;
            append_noop(probe);
            seal_records(probe);
            ok = open_segment(segment_, reason) && write_all(probe, reason);
        }
        // Deletes wait for a successful sync (a failed batch keeps them for
        // the next): a segment must not outlive the records that retire it
        // being on disk, nor be forgotten.
        std::vector<uint32_t>& deletes = pending_deletes_;
        for (auto& j : batch) {
            if (ok) ok = write_job(j, reason);
            deletes.insert(deletes.end(), j.deletes.begin(), j.deletes.end());
        }
        if (ok && fd_ >= 0 && ::fdatasync(fd_) != 0) {
            reason = errno_text("cannot sync", dir_ + "/" + segment_name(segment_));
            ok = false;
        }
        if (ok) {
            synced_size_ = size_;
            for (uint32_t s : deletes) {
                if (s == segment_ && fd_ >= 0) {
                    ::close(fd_); // synced above; the next write opens the new segment
                    fd_ = -1;
                }
                ::unlink((dir_ + "/" + segment_name(s)).c_str());
            }
            if (!deletes.empty()) sync_dir(dir_);
            deletes.clear();
        } else if (fd_ >= 0) {
            // Leave no half-written record behind: cut back to what is synced,
            // and write the next record there (not after a hole).
            if (::ftruncate(fd_, static_cast<off_t>(synced_size_)) == 0 &&
                ::lseek(fd_, static_cast<off_t>(synced_size_), SEEK_SET) >= 0)
                size_ = synced_size_;
            else {
                ::close(fd_); // reopened (at its end) by the next write
                fd_ = -1;
            }
        }
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
        {
            std::lock_guard lock(mu_);
            for (auto& j : batch)
                for (auto& c : j.chunks)
                    if (spares_.size() < max_spares && c.bytes.capacity() <= max_spare_bytes) {
                        c.bytes.clear();
                        spares_.push_back(std::move(c.bytes));
                    }
        }
        batch.clear();
    }
}

} // namespace wharf::store
