// Recovery of a damaged data directory. The rule: anything but a clean end,
// or a torn tail in the last segment's last write, stops startup with an
// error naming the file and offset, and nothing that holds whole records is
// deleted or cut.

#include "broker/store/file_io.hpp"
#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"
#include "broker/store/journal_writer.hpp"
#include "broker/store/tests/store_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace wharf::store {
namespace {

using namespace test;

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_all(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
}

// Where each record of a segment starts, as far as they read.
std::vector<size_t> record_offsets(const std::string& path) {
    const std::string data = read_all(path);
    std::vector<size_t> out;
    size_t pos = segment_magic.size();
    record r;
    for (size_t at = pos; read_record(data, pos, r) == read_status::ok; at = pos) out.push_back(at);
    return out;
}

void flip_byte(const std::string& path, size_t offset) {
    std::string data = read_all(path);
    ASSERT_LT(offset, data.size());
    data[offset] = static_cast<char>(data[offset] ^ 0x5a);
    write_all(path, data);
}

std::string seg_path(const std::string& dir, uint32_t n) { return dir + "/" + segment_name(n); }

// A store in `dir` that was closed cleanly: `count` 100-byte messages in
// queue "q" (seq 1..count), committed one at a time so that small segments
// rotate.
journal_options filled(const std::string& dir, uint64_t count, uint64_t segment_bytes = 64ull << 20) {
    journal_options o{dir, "n1"};
    o.segment_bytes = segment_bytes;
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_NE(s, nullptr);
    if (!s) return o;
    sync_watch w;
    w.install(*s);
    uint64_t e = 0;
    for (uint64_t i = 1; i <= count; ++i) {
        s->on_enqueue("q", entry(i, std::string(100, static_cast<char>('a' + i % 26))));
        e = s->commit();
    }
    EXPECT_TRUE(w.wait(e));
    return o;
}

TEST(store_recovery_damage, a_bit_flip_in_a_sealed_segment_refuses_to_start_and_keeps_the_segment) {
    temp_dir dir;
    const auto o = filled(dir.path, 100, 4096);
    const std::string first = seg_path(dir.path, 1);
    ASSERT_TRUE(::access(seg_path(dir.path, 2).c_str(), F_OK) == 0) << "segment 1 is not sealed";
    const auto offsets = record_offsets(first);
    ASSERT_GT(offsets.size(), 10u);
    flip_byte(first, offsets[0] + 30); // inside the first record's payload
    const std::string before = read_all(first);

    for (int attempt = 0; attempt < 2; ++attempt) {
        recovery_report r;
        auto s = journal_store::open(o, r);
        ASSERT_FALSE(s.has_value()) << "started on a damaged sealed segment: " << r.messages << " messages";
        EXPECT_NE(s.error().find(first), std::string::npos) << s.error();
        EXPECT_NE(s.error().find("offset " + std::to_string(offsets[0])), std::string::npos) << s.error();
        EXPECT_EQ(read_all(first), before) << "the damaged segment was changed";
    }
}

TEST(store_recovery_damage, a_bad_length_in_the_last_segment_refuses_to_start_instead_of_cutting_whole_records) {
    temp_dir dir;
    const auto o = filled(dir.path, 100);
    const std::string last = seg_path(dir.path, 1);
    const auto offsets = record_offsets(last);
    ASSERT_EQ(offsets.size(), 100u);
    std::string data = read_all(last);
    const uint32_t huge = 0x7fffffff; // past the end of the file
    std::memcpy(data.data() + offsets[10], &huge, 4);
    write_all(last, data);

    recovery_report r;
    auto s = journal_store::open(o, r);
    ASSERT_FALSE(s.has_value()) << "cut " << 100 - r.messages << " whole messages";
    EXPECT_NE(s.error().find(last), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("offset " + std::to_string(offsets[10])), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("followed by 89 valid records"), std::string::npos) << s.error();
    EXPECT_EQ(read_all(last), data) << "the segment was changed";
}

TEST(store_recovery_damage, a_bad_checksum_on_a_remove_record_refuses_to_start_instead_of_resurrecting) {
    temp_dir dir;
    auto o = filled(dir.path, 100);
    {
        recovery_report r;
        auto s = open_ok(o, r);
        ASSERT_EQ(r.messages, 100u);
        sync_watch w;
        w.install(*s);
        uint64_t e = 0;
        for (uint64_t i = 1; i <= 50; ++i) {
            s->on_remove("q", i);
            e = s->commit();
        }
        ASSERT_TRUE(w.wait(e));
    }
    // The removes went to a new segment, the last one; its first record is
    // the remove of seq 1.
    const auto segs = [&] {
        std::vector<uint32_t> out;
        for (uint32_t n = 1; n < 10; ++n)
            if (::access(seg_path(dir.path, n).c_str(), F_OK) == 0) out.push_back(n);
        return out;
    }();
    ASSERT_GE(segs.size(), 2u);
    const std::string last = seg_path(dir.path, segs.back());
    const auto recs = records_in(last);
    ASSERT_EQ(recs.size(), 50u);
    ASSERT_EQ(recs[0].first, record_type::remove);
    flip_byte(last, segment_magic.size() + 4); // its checksum
    const std::string before = read_all(last);

    recovery_report r;
    auto s = journal_store::open(o, r);
    ASSERT_FALSE(s.has_value()) << "started with " << r.messages << " messages (50 acknowledged removes undone)";
    EXPECT_NE(s.error().find(last), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("offset 8"), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("followed by 49 valid records"), std::string::npos) << s.error();
    EXPECT_EQ(read_all(last), before);
}

TEST(store_recovery_damage, a_torn_tail_is_cut_and_its_bytes_kept_aside) {
    temp_dir dir;
    const auto o = filled(dir.path, 10);
    const std::string last = seg_path(dir.path, 1);
    const auto offsets = record_offsets(last);
    ASSERT_EQ(offsets.size(), 10u);
    std::string data = read_all(last);
    data.resize(data.size() - 7); // the last record, cut short
    write_all(last, data);

    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(r.messages, 9u);
    ASSERT_EQ(r.warnings.size(), 1u);
    const std::string saved = last + ".torn-" + std::to_string(offsets[9]);
    EXPECT_NE(r.warnings[0].find(saved), std::string::npos) << r.warnings[0];
    EXPECT_EQ(read_all(saved), data.substr(offsets[9]));
    EXPECT_EQ(file_size(last), offsets[9]);
}

// A power cut can leave a page of the last write unwritten (zeros) while a
// later page of the same write reached the disk. Nothing of that write was
// synced, so the segment is cut where the damage starts (the bytes kept
// aside), as for any torn tail, rather than refused.
TEST(store_recovery_damage, a_page_of_the_last_write_that_never_reached_the_disk_is_cut_like_a_torn_tail) {
    temp_dir dir;
    const auto o = filled(dir.path, 200);
    const std::string last = seg_path(dir.path, 1);
    const auto offsets = record_offsets(last);
    ASSERT_EQ(offsets.size(), 200u);
    std::string data = read_all(last);
    const size_t page = 4096;
    const size_t hole = (offsets[100] + page - 1) / page * page; // a whole page, past record 100's start
    ASSERT_LT(hole + page, offsets[199]);
    std::fill(data.begin() + static_cast<std::ptrdiff_t>(hole), data.begin() + static_cast<std::ptrdiff_t>(hole + page),
              '\0');
    write_all(last, data);
    // The damage starts at the record the page begins in.
    const size_t torn = *std::prev(std::upper_bound(offsets.begin(), offsets.end(), hole));

    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_NE(s, nullptr) << "refused to start after a power cut's unwritten page";
    EXPECT_LT(r.messages, 200u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("never reached the disk"), std::string::npos) << r.warnings[0];
    EXPECT_EQ(file_size(last), torn);
    EXPECT_EQ(read_all(last + ".torn-" + std::to_string(torn)), data.substr(torn));
}

TEST(store_recovery_damage, a_zero_filled_tail_is_cut_without_a_copy) {
    temp_dir dir;
    const auto o = filled(dir.path, 10);
    const std::string last = seg_path(dir.path, 1);
    const uint64_t size = file_size(last);
    write_all(last, read_all(last) + std::string(4096, '\0'));

    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(r.messages, 10u);
    EXPECT_EQ(file_size(last), size);
    EXPECT_NE(::access((last + ".torn-" + std::to_string(size)).c_str(), F_OK), 0) << "zeros were copied aside";
}

// If recovery ever misses a segment (a directory listing cut short), the
// writer must not append to it as if it were new.
TEST(store_recovery_damage, the_writer_refuses_to_write_into_a_segment_it_did_not_create) {
    temp_dir dir;
    const std::string existing = seg_path(dir.path, 1);
    const std::string old = std::string(segment_magic) + "records of another life";
    write_all(existing, old);
    sync_watch w;
    {
        journal_writer writer(dir.path, 1, 0);
        writer.set_synced_callback([&w](uint64_t e, bool ok, const std::string& reason) {
            std::lock_guard l(w.mu);
            w.synced = e;
            w.last_ok = ok;
            w.reason = reason;
            w.cv.notify_all();
        });
        std::string bytes;
        append_enqueue(bytes, "q", 1, 0, flag_durable, 0, "new");
        journal_writer::job j{1, {}, {}, {}};
        j.chunks.push_back({1, std::move(bytes)});
        writer.submit(std::move(j));
        ASSERT_TRUE(w.wait(1));
    }
    EXPECT_FALSE(w.last_ok) << "wrote into " << existing;
    EXPECT_NE(w.reason.find(existing), std::string::npos) << w.reason;
    EXPECT_NE(w.reason.find("exists already"), std::string::npos) << w.reason;
    EXPECT_EQ(read_all(existing), old);
}

// A FIFO would block the start for ever; a directory in place of the last
// segment used to be "removed" (unlink failing unseen) and then refused
// every durable message.
TEST(store_recovery_damage, a_segment_or_meta_that_is_not_a_regular_file_refuses_to_start) {
    struct special {
        const char* what;
        std::string name;
        bool fifo;
    };
    for (const special& sp : {special{"a FIFO", segment_name(2), true},
                              special{"a directory", segment_name(2), false},
                              special{"a FIFO", "wharf.meta", true}}) {
        SCOPED_TRACE(sp.name + " as " + sp.what);
        temp_dir dir;
        const auto o = filled(dir.path, 10);
        const std::string path = dir.path + "/" + sp.name;
        ::unlink(path.c_str());
        ASSERT_EQ(sp.fifo ? ::mkfifo(path.c_str(), 0644) : ::mkdir(path.c_str(), 0755), 0);
        recovery_report r;
        auto s = journal_store::open(o, r);
        ASSERT_FALSE(s.has_value());
        EXPECT_NE(s.error().find(path + " is " + sp.what + ", not a regular file"), std::string::npos) << s.error();
        struct stat st {};
        ASSERT_EQ(::lstat(path.c_str(), &st), 0) << "removed";
        EXPECT_EQ(file_size(seg_path(dir.path, 1)), 8u + 10 * (enqueue_record_overhead + 1 + 100));
    }
}

// A file that reads short used to be taken whole, and recovery then cut or
// removed what it had not read. A sysfs attribute is such a file: a
// regular file of 4096 bytes that reads a few.
TEST(store_recovery_damage, a_file_that_reads_short_is_an_error_naming_the_offset) {
    const std::string path = "/sys/devices/system/cpu/online";
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 4096)
        GTEST_SKIP() << path << " is not a short-reading regular file here";
    std::string out;
    const std::string e = read_regular_file(path, out, 1 << 20);
    ASSERT_FALSE(e.empty()) << "read " << out.size() << " of 4096 bytes and called it the whole file";
    EXPECT_NE(e.find("cannot read " + path + " at offset "), std::string::npos) << e;
    EXPECT_TRUE(out.empty());
}

TEST(store_recovery_damage, segments_numbered_past_99999999_are_recovered) {
    temp_dir dir;
    const auto o = filled(dir.path, 60, 4096);
    ASSERT_EQ(::rename(seg_path(dir.path, 1).c_str(), (dir.path + "/journal-99999999.log").c_str()), 0);
    ASSERT_EQ(::rename(seg_path(dir.path, 2).c_str(), (dir.path + "/journal-100000000.log").c_str()), 0);
    ASSERT_NE(::access(seg_path(dir.path, 3).c_str(), F_OK), 0) << "the test expects two segments";
    const uint64_t held = records_in(dir.path + "/journal-100000000.log").size();
    ASSERT_GT(held, 0u);
    ASSERT_EQ(records_in(dir.path + "/journal-99999999.log").size() + held, 60u);
    {
        recovery_report r;
        auto s = open_ok(o, r);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(r.messages, 60u) << held << " in journal-100000000.log";
        EXPECT_EQ(r.segments, 2u);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1000, "next"));
        ASSERT_TRUE(w.wait(s->commit()));
    }
    EXPECT_EQ(records_in(dir.path + "/journal-100000001.log").size(), 1u);
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_EQ(r.messages, 61u);
}

TEST(store_recovery_damage, a_name_that_looks_like_a_segment_but_is_not_one_refuses_to_start) {
    for (const std::string name : {"journal-1.log", "journal-4294967296.log", "journal-0000000x.log",
                                   "journal-00000000.log", "journal-000000002.log"}) {
        SCOPED_TRACE(name);
        temp_dir dir;
        const auto o = filled(dir.path, 3);
        ASSERT_EQ(::rename(seg_path(dir.path, 1).c_str(), (dir.path + "/" + name).c_str()), 0);
        recovery_report r;
        auto s = journal_store::open(o, r);
        ASSERT_FALSE(s.has_value()) << "started with " << r.messages << " messages";
        EXPECT_NE(s.error().find(dir.path + "/" + name + " looks like a journal segment"), std::string::npos)
            << s.error();
    }
    temp_dir dir;
    const auto o = filled(dir.path, 3);
    ASSERT_EQ(::rename(seg_path(dir.path, 1).c_str(), seg_path(dir.path, UINT32_MAX).c_str()), 0);
    recovery_report r;
    auto s = journal_store::open(o, r);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().find("journal-4294967295.log is the last segment number"), std::string::npos) << s.error();
}

TEST(store_recovery_damage, a_zero_filled_last_segment_is_removed_like_a_short_header) {
    temp_dir dir;
    const auto o = filled(dir.path, 10);
    const std::string first = seg_path(dir.path, 1);
    const std::string before = read_all(first);
    write_all(seg_path(dir.path, 2), std::string(4096, '\0')); // created, then a power cut
    {
        recovery_report r;
        auto s = open_ok(o, r);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(r.messages, 10u);
        ASSERT_EQ(r.warnings.size(), 1u);
        EXPECT_NE(r.warnings[0].find(segment_name(2) + ": empty segment removed"), std::string::npos)
            << r.warnings[0];
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(11, "after"));
        ASSERT_TRUE(w.wait(s->commit()));
        EXPECT_TRUE(w.last_ok) << w.reason;
    }
    EXPECT_EQ(read_all(first), before);
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_EQ(r.messages, 11u);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(store_recovery_damage, a_segment_of_another_format_version_says_which) {
    temp_dir dir;
    const auto o = filled(dir.path, 3);
    const std::string first = seg_path(dir.path, 1);
    std::string data = read_all(first);
    data.replace(0, 8, "WHARFJ02");
    write_all(first, data);
    recovery_report r;
    auto s = journal_store::open(o, r);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().find(first + ": segment format v2; this wharfd reads v1"), std::string::npos) << s.error();
    EXPECT_EQ(read_all(first), data);
}

TEST(store_recovery_damage, an_empty_or_unparsable_meta_is_reported_as_damaged) {
    for (const std::string text : {"", "node-id=n1\n", "format=x\nnode-id=n1\n", "format=1\n"}) {
        SCOPED_TRACE(text);
        temp_dir dir;
        const auto o = filled(dir.path, 3);
        const std::string meta = dir.path + "/wharf.meta";
        write_all(meta, text);
        recovery_report r;
        auto s = journal_store::open(o, r);
        ASSERT_FALSE(s.has_value());
        EXPECT_NE(s.error().find(meta + " is damaged"), std::string::npos) << s.error();
        EXPECT_EQ(read_all(meta), text);
    }
}

TEST(store_recovery_damage, segments_without_a_meta_are_not_adopted_by_another_node) {
    temp_dir dir;
    auto o = filled(dir.path, 3);
    const std::string meta = dir.path + "/wharf.meta";
    ASSERT_EQ(::unlink(meta.c_str()), 0);
    o.node_id = "n2";
    recovery_report r;
    auto s = journal_store::open(o, r);
    ASSERT_FALSE(s.has_value()) << "node n2 took n1's " << r.messages << " messages";
    EXPECT_NE(s.error().find("but no wharf.meta"), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("restore wharf.meta"), std::string::npos) << s.error();
    EXPECT_NE(::access(meta.c_str(), F_OK), 0) << "a wharf.meta was created";
}

TEST(store_recovery_damage, a_segment_larger_than_a_segment_can_be_refuses_to_start_without_reading_it) {
    temp_dir dir;
    const auto o = filled(dir.path, 3, 4096);
    const std::string last = seg_path(dir.path, 1);
    const uint64_t huge = uint64_t{1} << 40; // sparse: no disk used
    ASSERT_EQ(::truncate(last.c_str(), static_cast<off_t>(huge)), 0);
    recovery_report r;
    auto s = journal_store::open(o, r); // read whole, this was std::bad_alloc
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().find(last + " is " + std::to_string(huge) + " bytes, more than it can be (at most " +
                             std::to_string(o.segment_bytes + max_record_size) + ")"),
              std::string::npos)
        << s.error();
    EXPECT_EQ(file_size(last), huge);
}

} // namespace
} // namespace wharf::store
