// The journal when writes fail (disk full, I/O error), made to happen with
// RLIMIT_FSIZE: a write past the limit fails with EFBIG. What the store
// counts as written must reach the disk once writing works again, and a
// segment must keep its header.

#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"
#include "broker/store/tests/store_test_support.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace wharf::store {
namespace {

using namespace test;

bool writable_within(const journal_store& s, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!s.writable()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

std::string segment_path(const std::string& dir, uint32_t n) { return dir + "/" + segment_name(n); }

TEST(journal_write_failure, a_compacted_message_is_not_lost_when_the_copy_fails) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 16 * 1024;
    const std::string body(100, 'y');
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        for (uint64_t i = 1; i <= 200; ++i) s->on_enqueue("q", entry(i, body));
        ASSERT_TRUE(w.wait(s->commit())); // segment 1 is full: the next record goes to segment 2
        s->on_enqueue("q", entry(201, "in segment 2"));
        ASSERT_TRUE(w.wait(s->commit()));
        ASSERT_TRUE(w.last_ok) << w.reason;
        ASSERT_EQ(s->segments_for_test(), (std::vector<uint32_t>{1, 2}));
        {
            file_size_limit full(file_size(segment_path(dir.path, 2)));
            // All of segment 1 consumed but message 1: the commit copies
            // message 1 forward and retires segment 1, and its write fails.
            for (uint64_t i = 2; i <= 200; ++i) s->on_remove("q", i);
            const uint64_t e = s->commit();
            ASSERT_TRUE(w.wait(e));
            EXPECT_FALSE(w.last_ok);
            EXPECT_FALSE(s->writable());
            ASSERT_EQ(s->segments_for_test(), (std::vector<uint32_t>{2})) << "no compaction happened";
        }
        s->on_enqueue("q", entry(202, "after"));
        ASSERT_TRUE(w.wait(s->commit()));
        EXPECT_TRUE(w.last_ok) << w.reason;
        EXPECT_NE(::access(segment_path(dir.path, 1).c_str(), F_OK), 0) << "segment 1 was not deleted";
    }
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_TRUE(r.warnings.empty());
    ASSERT_NE(queue_of(r, "q"), nullptr);
    EXPECT_EQ(seqs(*queue_of(r, "q")), (std::vector<uint64_t>{1, 201, 202}));
}

TEST(journal_write_failure, a_settled_message_stays_settled_when_its_remove_failed_to_write) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, "settled"));
        s->on_enqueue("q", entry(2, "kept"));
        ASSERT_TRUE(w.wait(s->commit()));
        ASSERT_TRUE(w.last_ok) << w.reason;
        {
            file_size_limit full(file_size(segment_path(dir.path, 1)));
            s->on_remove("q", 1);
            ASSERT_TRUE(w.wait(s->commit()));
            EXPECT_FALSE(w.last_ok);
            EXPECT_FALSE(s->writable());
        }
        // Nothing new is committed: the writer's probe finds the disk back.
        ASSERT_TRUE(writable_within(*s, std::chrono::seconds(10)));
        const auto records = records_in(segment_path(dir.path, 1));
        ASSERT_FALSE(records.empty());
        EXPECT_EQ(records.back(), std::make_pair(record_type::remove, uint64_t{1}))
            << "writable again, but the remove is not on disk";
    }
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_TRUE(r.warnings.empty());
    ASSERT_NE(queue_of(r, "q"), nullptr);
    EXPECT_EQ(bodies(*queue_of(r, "q")), (std::vector<std::string>{"kept"}));
}

// A stop while the disk still fails says so: the node used to stop as if
// everything were written, and a consumer's settled messages came back
// after the restart without a word.
TEST(journal_write_failure, a_stop_while_writes_fail_logs_what_was_not_written) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    std::ostringstream log;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
    auto saved = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, "settled"));
        ASSERT_TRUE(w.wait(s->commit()));
        ASSERT_TRUE(w.last_ok) << w.reason;
        file_size_limit full(file_size(segment_path(dir.path, 1)));
        s->on_remove("q", 1);
        ASSERT_TRUE(w.wait(s->commit()));
        EXPECT_FALSE(w.last_ok);
        s.reset(); // the stop, with the disk still full
    }
    spdlog::set_default_logger(saved);
    EXPECT_NE(log.str().find("journal: stopped with "), std::string::npos) << log.str();
    EXPECT_NE(log.str().find("bytes of records not written to " + dir.path), std::string::npos) << log.str();
    // And so it is: the settled message is back.
    recovery_report r;
    auto s = open_ok(o, r);
    ASSERT_NE(queue_of(r, "q"), nullptr);
    EXPECT_EQ(bodies(*queue_of(r, "q")), (std::vector<std::string>{"settled"}));
}

TEST(journal_write_failure, a_failed_first_write_to_a_new_segment_keeps_its_header) {
    // Below the header, and between the header and the end of the record.
    for (uint64_t limit : {uint64_t{4}, segment_magic.size() + 5}) {
        SCOPED_TRACE("file size limit " + std::to_string(limit));
        temp_dir dir;
        journal_options o{dir.path, "n1"};
        {
            recovery_report r;
            auto s = open_ok(o, r);
            sync_watch w;
            w.install(*s);
            {
                file_size_limit full(limit);
                s->on_enqueue("q", entry(1, "first"));
                ASSERT_TRUE(w.wait(s->commit()));
                EXPECT_FALSE(w.last_ok);
            }
            s->on_enqueue("q", entry(2, "second"));
            ASSERT_TRUE(w.wait(s->commit()));
            EXPECT_TRUE(w.last_ok) << w.reason;
        }
        recovery_report r;
        auto s = journal_store::open(o, r);
        ASSERT_TRUE(s.has_value()) << s.error();
        EXPECT_TRUE(r.warnings.empty());
        ASSERT_NE(queue_of(r, "q"), nullptr);
        // The refused first message was kept queued by the engine; its
        // record lands once the disk works, like the rest.
        EXPECT_EQ(bodies(*queue_of(r, "q")), (std::vector<std::string>{"first", "second"}));
    }
}

// A job whose records span two segments: the first is synced when the
// second is opened, then the second fails. The first must not be written
// twice, the second must be written again.
TEST(journal_write_failure, records_synced_before_the_failure_are_not_written_twice) {
    temp_dir dir;
    journal_options o{dir.path, "n1"};
    o.segment_bytes = 4096;
    {
        recovery_report r;
        auto s = open_ok(o, r);
        sync_watch w;
        w.install(*s);
        s->on_enqueue("q", entry(1, std::string(6000, 'a')));
        for (uint64_t i = 2; i <= 21; ++i) s->on_enqueue("q", entry(i, std::string(1200, 'f')));
        ASSERT_TRUE(w.wait(s->commit())); // all in segment 1; segment 2 is next
        ASSERT_TRUE(w.last_ok) << w.reason;
        {
            // Segment 2 ends at 4,140 bytes, segment 3 (message 1's copy) at 6,040.
            file_size_limit full(5000);
            for (uint64_t i = 2; i <= 21; ++i) s->on_remove("q", i);
            s->on_enqueue("q", entry(22, std::string(3700, 'b'))); // fills segment 2
            ASSERT_TRUE(w.wait(s->commit()));
            EXPECT_FALSE(w.last_ok);
            ASSERT_EQ(s->segments_for_test(), (std::vector<uint32_t>{2, 3})) << "no compaction happened";
        }
        ASSERT_TRUE(writable_within(*s, std::chrono::seconds(10)));
    }
    EXPECT_EQ(records_in(segment_path(dir.path, 2)).size(), 21u); // 20 removes, 1 enqueue
    const auto third = records_in(segment_path(dir.path, 3));
    EXPECT_EQ(third, (std::vector<std::pair<record_type, uint64_t>>{{record_type::enqueue, 1}}));
    recovery_report r;
    auto s = open_ok(o, r);
    EXPECT_TRUE(r.warnings.empty());
    ASSERT_NE(queue_of(r, "q"), nullptr);
    EXPECT_EQ(seqs(*queue_of(r, "q")), (std::vector<uint64_t>{1, 22}));
}

} // namespace
} // namespace wharf::store
