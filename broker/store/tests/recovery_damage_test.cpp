// Recovery of a damaged data directory. The rule: anything but a clean end,
// or a torn tail in the last segment's last write, stops startup with an
// error naming the file and offset, and nothing that holds whole records is
// deleted or cut.

#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"
#include "broker/store/tests/store_test_support.hpp"

#include <gtest/gtest.h>

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

} // namespace
} // namespace wharf::store
