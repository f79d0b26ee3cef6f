#include "broker/store/journal_store.hpp"

#include "broker/store/journal_format.hpp"

#include <unistd.h>

namespace wharf::store {

namespace {
uint8_t flags_of(const engine::queue_entry& e) {
    return static_cast<uint8_t>((e.redelivered ? flag_redelivered : 0) | (e.durable ? flag_durable : 0));
}
} // namespace

journal_store::journal_store(journal_options opts, std::unique_ptr<journal_writer> writer)
    : opts_(std::move(opts)), writer_(std::move(writer)) {}

journal_store::~journal_store() {
    commit();
    writer_.reset(); // writes what is queued, syncs, joins
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

// Rotation waits for commit(), so a segment can pass segment_bytes by one
// commit's records, but never by more than max_record_size: recovery refuses
// a larger file. `bytes` is at least the record's size.
void journal_store::start_record(uint64_t bytes) {
    if (active_ == 0 || segments_[active_].size + bytes > opts_.segment_bytes + max_record_size) rotate();
}

void journal_store::append_enqueue_record(std::string_view queue, uint64_t seq, live_entry& le) {
    start_record(enqueue_record_overhead + queue.size() + le.body.size());
    const size_t before = buf_.size();
    append_enqueue(buf_, queue, seq, le.delivery_count, le.flags, le.expiry_ms, le.body.bytes());
    le.segment = active_;
    le.bytes = static_cast<uint32_t>(buf_.size() - before);
    auto& seg = segments_[active_];
    ++seg.live;
    seg.live_bytes += le.bytes;
    seg.size += le.bytes;
}

// A record the format cannot hold (a queue name over 65,535 bytes, a body
// near 4 GiB) is not written, and its message is not counted as stored; the
// epoch that covers it is reported failed, so its producer hears "refused"
// and the message lives on in memory only. The engine is to refuse such
// names and bodies before they get here; this keeps the node up if one
// slips through (the format functions would throw).
void journal_store::on_enqueue(std::string_view queue, const engine::queue_entry& e) {
    if (!enqueue_record_fits(queue.size(), e.body.size())) {
        if (refused_.empty())
            refused_ = "a queue name of " + std::to_string(queue.size()) + " bytes and a body of " +
                       std::to_string(e.body.size()) + " bytes do not fit a journal record (names hold at most " +
                       std::to_string(max_queue_name_size) + " bytes, records " + std::to_string(max_record_size) +
                       ")";
        return;
    }
    auto& bucket = live_[std::string(queue)];
    live_entry le{0, 0, e.body, e.delivery_count, flags_of(e), e.expiry_ms};
    append_enqueue_record(queue, e.seq, le);
    // A stored message enqueued again (its bytes changed) is replaced:
    // recovery keeps the last enqueue record of a seq, so the old one is dead.
    auto [at, added] = bucket.try_emplace(e.seq, std::move(le));
    if (added) {
        ++live_count_;
        return;
    }
    auto& old = segments_[at->second.segment];
    --old.live;
    old.live_bytes -= at->second.bytes;
    at->second = std::move(le);
}

// Only a stored message gets an update record (recovery would ignore one
// for a message it does not hold).
void journal_store::on_update(std::string_view queue, const engine::queue_entry& e) {
    auto q = live_.find(std::string(queue));
    if (q == live_.end()) return;
    auto m = q->second.find(e.seq);
    if (m == q->second.end()) return;
    start_record(enqueue_record_overhead + queue.size());
    const size_t before = buf_.size();
    append_update(buf_, queue, e.seq, e.delivery_count, flags_of(e));
    segments_[active_].size += buf_.size() - before;
    m->second.delivery_count = e.delivery_count;
    m->second.flags = flags_of(e);
}

void journal_store::on_remove(std::string_view queue, uint64_t seq) {
    auto q = live_.find(std::string(queue));
    if (q == live_.end()) return;
    auto m = q->second.find(seq);
    if (m == q->second.end()) return;
    start_record(enqueue_record_overhead + queue.size());
    const size_t before = buf_.size();
    append_remove(buf_, queue, seq);
    segments_[active_].size += buf_.size() - before;
    auto& seg = segments_[m->second.segment];
    --seg.live;
    seg.live_bytes -= m->second.bytes;
    q->second.erase(m);
    --live_count_;
    if (q->second.empty()) live_.erase(q);
}

// Starts a new segment: what is buffered for the old one goes out first.
// After segment UINT32_MAX there is none: it keeps growing (open() refuses
// a directory that holds it, so this takes 4 billion rotations).
void journal_store::rotate() {
    if (next_segment_ == 0 && active_ != 0) return;
    if (active_ != 0 && !buf_.empty()) {
        chunks_.push_back({active_, std::move(buf_)});
        buf_ = writer_->spare();
    }
    active_ = next_segment_++;
    segments_[active_].size = segment_magic.size();
}

// Deletes segments oldest-first while nothing in them is live. (Only
// oldest-first: a newer segment's remove records must outlive the older
// segment whose enqueue records they cancel.)
void journal_store::retire_segments() {
    while (!segments_.empty()) {
        auto it = segments_.begin();
        if (it->first == active_ || it->second.live != 0) break;
        deletes_.push_back(it->first);
        segments_.erase(it);
    }
}

// The oldest segment is mostly dead: copy its live messages forward so that
// it (and the dead segments behind it) can go. Not while the disk fails: the
// copies would be written at the worst time, and until the disk is back the
// writer would have to keep them (and the segment they empty) in memory.
// (When a failure is not yet known, a compaction is safe: the writer keeps
// what it could not write, and the delete runs only after.)
void journal_store::compact_oldest() {
    if (segments_.size() < 2 || !writer_->writable()) return;
    auto oldest = segments_.begin();
    if (oldest->first == active_ || oldest->second.live == 0) return;
    const auto& info = oldest->second;
    if (static_cast<double>(info.live_bytes) >= opts_.compact_below * static_cast<double>(info.size)) return;
    const uint32_t seg = oldest->first;
    for (auto& [name, msgs] : live_) {
        for (auto& [seq, le] : msgs) {
            if (le.segment != seg) continue;
            auto& from = segments_[seg];
            --from.live;
            from.live_bytes -= le.bytes;
            append_enqueue_record(name, seq, le);
        }
    }
}

uint64_t journal_store::commit() {
    if (active_ != 0 && segments_[active_].size >= opts_.segment_bytes) rotate();
    compact_oldest();
    // A drained active segment that has grown is retired too, so that an
    // empty queue leaves an almost empty directory.
    if (active_ != 0 && live_count_ == 0 && segments_[active_].size >= (1u << 20)) rotate();
    retire_segments();
    if (buf_.empty() && chunks_.empty() && deletes_.empty() && refused_.empty()) return 0;
    journal_writer::job j{++epoch_, std::move(chunks_), std::move(deletes_), std::move(refused_)};
    refused_.clear();
    if (!buf_.empty()) {
        j.chunks.push_back({active_, std::move(buf_)});
        buf_ = writer_->spare();
    }
    chunks_.clear();
    deletes_.clear();
    writer_->submit(std::move(j));
    return epoch_;
}

std::vector<uint32_t> journal_store::segments_for_test() const {
    std::vector<uint32_t> out;
    for (const auto& [n, info] : segments_) out.push_back(n);
    return out;
}

} // namespace wharf::store
