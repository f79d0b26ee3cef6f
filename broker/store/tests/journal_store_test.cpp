#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"
#include "broker/store/tests/store_test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::store {
namespace {

using namespace test;

TEST(journal_store, recovers_messages_in_order_with_delivery_counts) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    {
        recovery_report r;
        auto s = open_ok(o, r);
        EXPECT_EQ(r.messages, 0u);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("a", entry(1, "a1"));
        s->on_enqueue("b", entry(1, "b1"));
        s->on_enqueue("a", entry(2, "a2"));
        s->on_enqueue("a", entry(3, "a3"));
        s->on_remove("a", 2);
        auto redelivered = entry(3, "a3", 4);
        redelivered.redelivered = true;
        s->on_update("a", redelivered);
        uint64_t e = s->commit();
        ASSERT_GT(e, 0u);
        ASSERT_TRUE(w.wait(e));
        EXPECT_TRUE(w.last_ok);
    }
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_EQ(r.messages, 3u);
    EXPECT_TRUE(r.warnings.empty());
    auto* a = queue_of(r, "a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(bodies(*a), (std::vector<std::string>{"a1", "a3"}));
    EXPECT_EQ((*a)[0].seq, 1u);
    EXPECT_EQ((*a)[1].seq, 3u);
    EXPECT_EQ((*a)[1].delivery_count, 4u);
    EXPECT_TRUE((*a)[1].redelivered);
    EXPECT_TRUE((*a)[1].persistent);
    ASSERT_NE(queue_of(r, "b"), nullptr);
}

TEST(journal_store, torn_tail_is_cut_and_reported) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    std::string seg_path;
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, "kept"));
        s->on_enqueue("q", entry(2, "torn"));
        ASSERT_TRUE(w.wait(s->commit()));
        seg_path = dir.path + "/" + segment_name(s->segments_for_test().back());
    }
    // Cut the last record in half, as a crash in the middle of a write would.
    struct stat st {};
    ASSERT_EQ(::stat(seg_path.c_str(), &st), 0);
    ASSERT_EQ(::truncate(seg_path.c_str(), st.st_size - 5), 0);
    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_EQ(r.messages, 1u);
    EXPECT_EQ(bodies(*queue_of(r, "q")), (std::vector<std::string>{"kept"}));
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("torn record"), std::string::npos) << r.warnings[0];
    EXPECT_NE(r.warnings[0].find(segment_name(1)), std::string::npos) << r.warnings[0];
}

TEST(journal_store, bad_checksum_is_detected) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    std::string seg_path;
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, "good"));
        s->on_enqueue("q", entry(2, "flipped"));
        ASSERT_TRUE(w.wait(s->commit()));
        seg_path = dir.path + "/" + segment_name(s->segments_for_test().back());
    }
    {
        std::fstream f(seg_path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-2, std::ios::end);
        f.put('X');
    }
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_EQ(r.messages, 1u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("corrupt record"), std::string::npos) << r.warnings[0];
}

TEST(journal_format, records_read_back_only_once_sealed) {
    std::string bytes;
    append_enqueue(bytes, "q", 7, 2, flag_durable, 0, "body");
    append_remove(bytes, "q", 7);
    size_t pos = 0;
    record r;
    EXPECT_EQ(read_record(bytes, pos, r), read_status::corrupt); // no checksum yet
    seal_records(bytes);
    pos = 0;
    ASSERT_EQ(read_record(bytes, pos, r), read_status::ok);
    EXPECT_EQ(r.type, record_type::enqueue);
    EXPECT_EQ(r.queue, "q");
    EXPECT_EQ(r.seq, 7u);
    EXPECT_EQ(r.body, "body");
    ASSERT_EQ(read_record(bytes, pos, r), read_status::ok);
    EXPECT_EQ(r.type, record_type::remove);
    EXPECT_EQ(read_record(bytes, pos, r), read_status::end);
}

TEST(journal_format, a_queue_name_over_65535_bytes_is_refused_not_cut_short) {
    const std::string longest(max_queue_name_size, 'n');
    std::string bytes;
    append_remove(bytes, longest, 9);
    seal_records(bytes);
    size_t pos = 0;
    record r;
    ASSERT_EQ(read_record(bytes, pos, r), read_status::ok);
    EXPECT_EQ(r.queue.size(), longest.size());
    EXPECT_EQ(r.seq, 9u);

    const std::string too_long(70000, 'n');
    std::string out = "before";
    EXPECT_THROW(append_enqueue(out, too_long, 1, 0, 0, 0, "b"), std::length_error);
    EXPECT_THROW(append_update(out, too_long, 1, 0, 0), std::length_error);
    EXPECT_THROW(append_remove(out, too_long, 1), std::length_error);
    EXPECT_EQ(out.size(), 6u) << "a refused record left bytes behind";
    EXPECT_FALSE(enqueue_record_fits(max_queue_name_size + 1, 0));
    EXPECT_TRUE(enqueue_record_fits(max_queue_name_size, 0));
}

TEST(journal_format, a_record_over_4_gib_is_refused_before_its_body_is_read) {
    // A whole record, its 8-byte header included, holds at most 2^32 - 1 bytes.
    const size_t largest_body = max_record_size - enqueue_record_overhead - 1; // queue "q"
    EXPECT_TRUE(enqueue_record_fits(1, largest_body));
    EXPECT_FALSE(enqueue_record_fits(1, largest_body + 1));
    EXPECT_FALSE(enqueue_record_fits(0, size_t{1} << 40));
    EXPECT_FALSE(enqueue_record_fits(1, SIZE_MAX)); // no wrap in the sum

    // The body's size is checked before a byte of it is read, so a view
    // whose size claims more than its 8-byte buffer is never dereferenced.
    const char small[8] = {};
    std::string out;
    EXPECT_THROW(append_enqueue(out, "q", 1, 0, 0, 0, std::string_view(small, largest_body + 1)),
                 std::length_error);
    EXPECT_TRUE(out.empty());
}

TEST(journal_store, a_record_that_cannot_be_stored_refuses_its_epoch_and_keeps_the_node_up) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    const std::string too_long(70000, 'n');
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, "stored"));
        s->on_enqueue(too_long, entry(1, "never stored"));
        s->on_update(too_long, entry(1, "never stored", 3));
        s->on_remove(too_long, 1);
        const uint64_t e = s->commit();
        ASSERT_GT(e, 0u) << "nothing to wait for: the producer would hear 'accepted'";
        ASSERT_TRUE(w.wait(e));
        EXPECT_FALSE(w.last_ok);
        EXPECT_NE(w.reason.find("65535"), std::string::npos) << w.reason;
        EXPECT_TRUE(s->writable()) << "the disk is fine";
        EXPECT_EQ(s->live_for_test(), 1u);

        s->on_enqueue("q", entry(2, "stored too"));
        ASSERT_TRUE(w.wait(s->commit()));
        EXPECT_TRUE(w.last_ok) << w.reason;
    }
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_TRUE(r.warnings.empty());
    ASSERT_EQ(r.queues.size(), 1u);
    ASSERT_NE(queue_of(r, "q"), nullptr);
    EXPECT_EQ(bodies(*queue_of(r, "q")), (std::vector<std::string>{"stored", "stored too"}));
}

TEST(journal_store, refuses_another_nodes_directory) {
    temp_dir dir;
    {
        recovery_report r;
        auto s = open_ok({dir.path, "n1"}, r);
    }
    recovery_report r;
    auto s = journal_store::open({dir.path, "n2"}, r);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().find("belongs to node 'n1'"), std::string::npos) << s.error();
    EXPECT_NE(s.error().find(dir.path), std::string::npos) << s.error();
}

TEST(journal_store, refuses_another_format) {
    temp_dir dir;
    {
        std::ofstream meta(dir.path + "/wharf.meta");
        meta << "format=99\nnode-id=n1\n";
    }
    recovery_report r;
    auto s = journal_store::open({dir.path, "n1"}, r);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().find("format 99"), std::string::npos) << s.error();
}

TEST(journal_store, one_process_per_directory) {
    temp_dir dir;
    recovery_report r1, r2;
    auto first = open_ok({dir.path, "n1"}, r1);
    auto second = journal_store::open({dir.path, "n1"}, r2);
    // flock is per open file description: a second open in one process is
    // refused too.
    ASSERT_FALSE(second.has_value());
    EXPECT_NE(second.error().find("in use"), std::string::npos) << second.error();
}

TEST(journal_store, space_is_reclaimed_after_a_queue_drains) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 64 * 1024;
    watched_store ws(o);
    auto& s = ws.s;
    auto& w = ws.w;
    const std::string body(200, 'x');
    uint64_t e = 0;
    for (uint64_t i = 1; i <= 5000; ++i) {
        s->on_enqueue("q", entry(i, body));
        if (i % 100 == 0) e = s->commit();
    }
    ASSERT_TRUE(w.wait(e));
    const uint64_t full = dir_bytes(dir.path);
    EXPECT_GT(full, 1000000u);
    EXPECT_GT(s->segments_for_test().size(), 10u);
    for (uint64_t i = 1; i <= 5000; ++i) {
        s->on_remove("q", i);
        if (i % 100 == 0) e = s->commit();
    }
    e = std::max(e, s->commit());
    ASSERT_TRUE(w.wait(e));
    EXPECT_LE(s->segments_for_test().size(), 2u);
    EXPECT_LT(dir_bytes(dir.path), 200u * 1024) << "was " << full;
}

TEST(journal_store, a_sparse_old_segment_is_compacted) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 16 * 1024;
    uint64_t e = 0;
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        const std::string body(100, 'y');
        for (uint64_t i = 1; i <= 2000; ++i) {
            s->on_enqueue("q", entry(i, body));
            if (i % 50 == 0) e = s->commit();
        }
        // Consume everything but the first message: it pins the oldest segment.
        for (uint64_t i = 2; i <= 2000; ++i) {
            s->on_remove("q", i);
            if (i % 50 == 0) e = s->commit();
        }
        e = std::max(e, s->commit());
        e = std::max(e, s->commit());
        ASSERT_TRUE(w.wait(e));
        EXPECT_LE(s->segments_for_test().size(), 2u) << "the pinned message was not moved forward";
    }
    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_EQ(r.messages, 1u);
    EXPECT_EQ((*queue_of(r, "q"))[0].seq, 1u);
}

TEST(journal_store, group_commit_reports_every_epoch) {
    temp_dir dir;
    recovery_report r;
    auto s = open_ok({dir.path, "n1"}, r);
    sync_watch w;
    w.install(*s);
    uint64_t last = 0;
    for (uint64_t i = 1; i <= 1000; ++i) {
        s->on_enqueue("q", entry(i, "m"));
        last = s->commit();
    }
    EXPECT_EQ(last, 1000u);
    ASSERT_TRUE(w.wait(last));
    EXPECT_TRUE(w.last_ok);
}

// A stored message enqueued again with the same seq (a consumer's modified
// outcome annotated it) is replaced: a restart finds the new bytes, in
// their place, and the old records' space is reclaimed like any other.
TEST(journal_store, a_message_stored_again_replaces_its_old_record) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 16 * 1024;
    const uint64_t n = 400;
    {
        watched_store ws(o);
        uint64_t e = 0;
        for (uint64_t i = 1; i <= n; ++i) ws.s->on_enqueue("q", entry(i, std::string(100, 'y')));
        e = ws.s->commit();
        for (uint64_t i = 1; i <= n; ++i) {
            ws.s->on_enqueue("q", entry(i, "z" + std::to_string(i), 1));
            if (i % 50 == 0) e = ws.s->commit();
        }
        ASSERT_TRUE(ws.w.wait(e));
    }
    {
        recovery_report r;
        auto s = open_ok(o, r);
        ASSERT_EQ(r.messages, n) << "a replaced message was recovered twice, or not at all";
        const auto* q = queue_of(r, "q");
        ASSERT_TRUE(q != nullptr);
        EXPECT_EQ(bodies(*q).front(), "z1");
        EXPECT_EQ(bodies(*q).back(), "z" + std::to_string(n));
        EXPECT_EQ(seqs(*q).front(), 1u);
        EXPECT_EQ((*q)[0].delivery_count, 1u);
    }
}

TEST(journal_store, the_space_of_a_replaced_record_is_reclaimed) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 16 * 1024;
    watched_store ws(o);
    auto& s = ws.s;
    auto& w = ws.w;
    const uint64_t n = 1000;
    uint64_t e = 0;
    for (uint64_t i = 1; i <= n; ++i) {
        s->on_enqueue("q", entry(i, std::string(100, 'y')));
        if (i % 50 == 0) e = s->commit();
    }
    const size_t filled = s->segments_for_test().size();
    EXPECT_GT(filled, 4u);
    for (uint64_t i = 1; i <= n; ++i) {
        s->on_enqueue("q", entry(i, std::string(100, 'z'), 1));
        if (i % 50 == 0) e = s->commit();
    }
    ASSERT_TRUE(w.wait(e));
    // Every message still queued: the segments of the replaced records went.
    EXPECT_LE(s->segments_for_test().size(), filled + 1) << "segments holding only replaced records stay";
    for (uint64_t i = 1; i <= n; ++i) {
        s->on_remove("q", i);
        if (i % 50 == 0) e = s->commit();
    }
    e = std::max(e, s->commit());
    ASSERT_TRUE(w.wait(e));
    EXPECT_LE(s->segments_for_test().size(), 2u) << "segments whose records were all replaced or removed stay";
}

} // namespace
} // namespace wharf::store
