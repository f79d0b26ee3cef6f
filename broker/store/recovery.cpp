// journal_store::open: claim the directory, read every segment, rebuild the
// live messages, cut a torn tail, and start the writer on a fresh segment.

#include "broker/store/data_dir.hpp"
#include "broker/store/file_io.hpp"
#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"

#include <algorithm>
#include <utility>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::store {

namespace {

// The error that stops startup on a damaged segment: which file, where,
// what, and that nothing was changed.
std::string damaged(const std::string& dir, const std::string& path, const std::string& what) {
    return "data-dir '" + dir + "': " + path + ": " + what +
           ". Refusing to start; nothing in the directory was changed. To start without this segment's "
           "messages, move " + path + " out of the directory (see docs/storage-engine.md, \"Recovery\")";
}

void sync_dir_of(const std::string& path) {
    const std::string dir = path.substr(0, path.rfind('/'));
    int d = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        ::fsync(d);
        ::close(d);
    }
}

// Copies a torn tail aside before it is cut, as `<segment>.torn-<offset>`
// (then `.1`, `.2`, ... if that name is taken), synced. Returns the name.
result<std::string, std::string> save_torn_tail(const std::string& path, std::string_view bytes, size_t at) {
    std::string name;
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; ++i) {
        name = path + ".torn-" + std::to_string(at) + (i == 0 ? "" : "." + std::to_string(i));
        fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return fail("cannot save the torn tail of " + path + " as " + name + ": " + std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            const std::string e = std::strerror(errno);
            ::close(fd);
            ::unlink(name.c_str());
            return fail("cannot save the torn tail of " + path + " as " + name + ": " + e);
        }
        done += static_cast<size_t>(n);
    }
    const bool synced = ::fsync(fd) == 0;
    const std::string e = std::strerror(errno);
    ::close(fd);
    if (!synced) return fail("cannot sync " + name + ": " + e);
    sync_dir_of(name);
    return name;
}

// Cuts `path` to `at` bytes, synced. Returns an error, or "" when done.
std::string cut_segment(const std::string& path, size_t at) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(at)) != 0 || ::fsync(fd) != 0) {
        const std::string e = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return "cannot cut the torn tail of " + path + " at offset " + std::to_string(at) + ": " + e;
    }
    ::close(fd);
    return {};
}

struct recovered_entry {
    uint32_t segment;
    uint32_t bytes;
    engine::queue_entry e;
};

} // namespace

result<std::unique_ptr<journal_store>, std::string> journal_store::open(const journal_options& opts,
                                                                        recovery_report& report) {
    const auto started = std::chrono::steady_clock::now();
    auto claimed = claim_data_dir(opts.dir, opts.node_id);
    if (!claimed) return fail(claimed.error());
    // Until the store owns it, release the lock on every early return.
    struct lock_guard_fd {
        int fd;
        ~lock_guard_fd() { if (fd >= 0) ::close(fd); }
    } lock{claimed.value()};

    // A listing cut short would look like a directory with fewer (or no)
    // segments: the node would start without their messages.
    std::vector<uint32_t> numbers;
    std::vector<std::string> names;
    if (auto err = list_names(opts.dir, names); !err.empty()) return fail(err);
    for (const std::string& name : names) {
        if (uint32_t n = segment_number(name)) {
            numbers.push_back(n);
        } else if (looks_like_segment(name)) {
            return fail("data-dir '" + opts.dir + "': " + opts.dir + "/" + name +
                        " looks like a journal segment, but its name is not one (journal-NNNNNNNN.log, "
                        "at least 8 digits, 1 to 4294967295). Refusing to start: rename or move it");
        }
    }
    std::sort(numbers.begin(), numbers.end());

    std::unordered_map<std::string, std::unordered_map<uint64_t, recovered_entry>> live;
    std::map<uint32_t, uint64_t> sizes;
    std::string data;
    for (size_t i = 0; i < numbers.size(); ++i) {
        const uint32_t seg = numbers[i];
        const bool last = i + 1 == numbers.size();
        const std::string path = opts.dir + "/" + segment_name(seg);
        // The store never lets a segment pass segment_bytes + max_record_size
        // (journal_store::start_record): a larger file is not ours.
        if (auto e = read_regular_file(path, data, opts.segment_bytes + max_record_size); !e.empty())
            return fail("data-dir '" + opts.dir + "': " + e + "; refusing to start");
        report.bytes += data.size();
        if (data.size() < segment_magic.size() || data.compare(0, segment_magic.size(), segment_magic) != 0) {
            const bool zeros = std::all_of(data.begin(), data.end(), [](char c) { return c == 0; });
            if (data.empty() || (last && (zeros || segment_magic.substr(0, data.size()) == data))) {
                // A segment created just before a crash: its header not all
                // written, or the file's size on disk but not its bytes
                // (zeros after a power cut). It holds no record.
                // (A regular file: read_regular_file refuses anything else.)
                if (::unlink(path.c_str()) != 0)
                    return fail("data-dir '" + opts.dir + "': cannot remove the empty segment " + path + ": " +
                                std::strerror(errno));
                sync_dir_of(path);
                report.warnings.push_back(path + ": empty segment removed (" + std::to_string(data.size()) +
                                          (data.empty() || !zeros ? " bytes of its header)" : " zero bytes)"));
                continue;
            }
            constexpr std::string_view family = segment_magic.substr(0, 6); // "WHARFJ", then the version
            if (data.size() >= segment_magic.size() && data.compare(0, family.size(), family) == 0) {
                const std::string v = data.substr(family.size(), 2);
                const bool digits = std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
                return fail("data-dir '" + opts.dir + "': " + path + ": segment format v" +
                            (digits ? std::to_string(std::stoi(v)) : "'" + v + "'") + "; this wharfd reads v" +
                            std::to_string(format_version) + ". Refusing to start: use the matching wharfd");
            }
            return fail("data-dir '" + opts.dir + "': " + path +
                        " is not a Wharf journal segment (bad header); refusing to start");
        }
        size_t pos = segment_magic.size();
        record r;
        for (;;) {
            const size_t at = pos;
            read_status st = read_record(data, pos, r);
            if (st == read_status::end) break;
            if (st != read_status::ok) {
                const size_t skipped = data.size() - at;
                // A sealed segment was synced whole before the next one was
                // started: damage there is not a crash's torn write. Skipping
                // it would lose every record after it, and its live messages
                // would then look gone (and their segment be deleted).
                if (!last)
                    return fail(damaged(opts.dir, path,
                                        std::string(st == read_status::torn ? "torn" : "corrupt") +
                                            " record at offset " + std::to_string(at) +
                                            " of a segment that is not the last (" + std::to_string(skipped) +
                                            " bytes from there to its end)"));
                const std::string what = std::string(st == read_status::torn ? "torn" : "corrupt") +
                                         " record at offset " + std::to_string(at);
                // In the last segment it is the last write, cut short by a
                // crash, if no valid record follows it anywhere: a bad
                // length or checksum in the middle would otherwise cut off
                // every record after it. Or if a whole page of zeros lies
                // between it and the next valid record: a power cut can
                // leave pages of the last write unwritten (read as zeros)
                // while later ones of it reached the disk, and none of that
                // write was synced (a sync covers the whole file, so the
                // page would have been written too): cutting loses nothing
                // a producer was told is stored. A flipped bit leaves no
                // such page.
                const size_t next = find_valid_record(data, at + 1);
                const bool unwritten_page = next < data.size() && holds_a_zero_page(data, at, next);
                if (next < data.size() && !unwritten_page)
                    return fail(damaged(opts.dir, path,
                                        what + " of the last segment, followed by " +
                                            std::to_string(count_valid_records(data, next)) +
                                            " valid records (the first at offset " + std::to_string(next) +
                                            "): damage, not a write cut short"));
                const bool zeros = std::all_of(data.begin() + static_cast<std::ptrdiff_t>(at), data.end(),
                                               [](char c) { return c == 0; });
                std::string saved;
                if (!zeros) {
                    auto kept = save_torn_tail(path, std::string_view(data).substr(at), at);
                    if (!kept) return fail("data-dir '" + opts.dir + "': " + kept.error());
                    saved = "; the cut bytes are in " + kept.value();
                }
                if (auto cut = cut_segment(path, at); !cut.empty())
                    return fail("data-dir '" + opts.dir + "': " + cut);
                report.warnings.push_back(
                    path + ": " + what + "; cut " + std::to_string(skipped) +
                    " bytes to the end of the segment (the last write, cut short: " +
                    (unwritten_page ? "a page of it never reached the disk, so none of it was synced"
                                    : "no valid record after it") +
                    ")" + saved);
                data.resize(at);
                break;
            }
            switch (r.type) {
            case record_type::enqueue: {
                recovered_entry re{seg, static_cast<uint32_t>(pos - at), {}};
                re.e.seq = r.seq;
                re.e.body = engine::message_ref::copy_of(r.body);
                re.e.delivery_count = r.delivery_count;
                re.e.redelivered = (r.flags & flag_redelivered) != 0;
                re.e.durable = (r.flags & flag_durable) != 0;
                re.e.persistent = true;
                re.e.expiry_ms = r.expiry_ms;
                live[std::string(r.queue)].insert_or_assign(r.seq, std::move(re));
                break;
            }
            case record_type::update: {
                auto q = live.find(std::string(r.queue));
                if (q == live.end()) break;
                auto m = q->second.find(r.seq);
                if (m == q->second.end()) break;
                m->second.e.delivery_count = r.delivery_count;
                m->second.e.redelivered = (r.flags & flag_redelivered) != 0;
                break;
            }
            case record_type::remove: {
                auto q = live.find(std::string(r.queue));
                if (q != live.end()) q->second.erase(r.seq);
                break;
            }
            case record_type::noop:
                break;
            }
        }
        sizes[seg] = data.size();
    }

    if (!sizes.empty() && sizes.rbegin()->first == UINT32_MAX)
        return fail("data-dir '" + opts.dir + "': " + opts.dir + "/" + segment_name(UINT32_MAX) +
                    " is the last segment number there is; refusing to start (there is none to write next)");
    const uint32_t next = sizes.empty() ? 1 : sizes.rbegin()->first + 1;
    auto writer = std::make_unique<journal_writer>(opts.dir, next, 0);
    std::unique_ptr<journal_store> store(new journal_store(opts, std::move(writer)));
    store->next_segment_ = next;
    store->lock_fd_ = std::exchange(lock.fd, -1);
    // Hand the live messages to the report (seq order) and the bookkeeping.
    for (auto& [name, msgs] : live) {
        if (msgs.empty()) continue;
        std::vector<recovered_entry*> order;
        order.reserve(msgs.size());
        for (auto& [seq, re] : msgs) order.push_back(&re);
        std::sort(order.begin(), order.end(),
                  [](const recovered_entry* a, const recovered_entry* b) { return a->e.seq < b->e.seq; });
        std::vector<engine::queue_entry> entries;
        entries.reserve(order.size());
        auto& bucket = store->live_[name];
        for (recovered_entry* re : order) {
            auto& seg = store->segments_[re->segment];
            ++seg.live;
            seg.live_bytes += re->bytes;
            bucket.emplace(re->e.seq, live_entry{re->segment, re->bytes, re->e.body,
                                                 re->e.delivery_count,
                                                 static_cast<uint8_t>((re->e.redelivered ? flag_redelivered : 0) |
                                                                      (re->e.durable ? flag_durable : 0)),
                                                 re->e.expiry_ms});
            ++store->live_count_;
            entries.push_back(std::move(re->e));
        }
        report.messages += entries.size();
        report.queues.emplace_back(name, std::move(entries));
    }
    for (auto& [seg, size] : sizes) store->segments_[seg].size = size;
    report.segments = static_cast<uint32_t>(sizes.size());
    store->retire_segments();
    if (!store->deletes_.empty()) store->commit();
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return store;
}

} // namespace wharf::store
