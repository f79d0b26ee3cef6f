// What only the sqlite backend does: its exact clock, its lazy sweep, the
// pruned change log, the file. The shared contract is store_contract_test.cpp.
#include "wlm/metadata/tests/store_fixture.hpp"

#include <fstream>
#include <map>
#include <vector>

namespace wharf::wlm {
namespace {

using namespace std::chrono_literals;

TEST_F(sqlite_metadata_store_test, lease_expiry_follows_renewals_and_ends_with_the_lease) {
    auto s = open_store();
    const int64_t start = clock_->load();
    auto lease = *s->grant_lease(1000ms);
    auto expiry = s->lease_expiry(lease);
    ASSERT_TRUE(expiry) << expiry.error().description;
    EXPECT_EQ(*expiry, start + 1000);

    advance(600ms);
    ASSERT_TRUE(s->keep_alive(lease));
    EXPECT_EQ(*s->lease_expiry(lease), start + 1600); // another ttl from the renewal

    // Another connection to the same file sees the same time.
    auto other = open_store();
    EXPECT_EQ(*other->lease_expiry(lease), start + 1600);

    advance(1000ms); // reaches the expiry: the lease is gone
    auto gone = s->lease_expiry(lease);
    ASSERT_FALSE(gone);
    EXPECT_EQ(gone.error().code, store_errc::lease_expired);

    auto revoked = *s->grant_lease(10s);
    ASSERT_TRUE(s->revoke_lease(revoked));
    EXPECT_EQ(s->lease_expiry(revoked).error().code, store_errc::lease_expired);
    EXPECT_EQ(s->lease_expiry(12345).error().code, store_errc::lease_expired);
}

// sqlite's own clock: the keys go at the TTL to the millisecond, in key order.
TEST_F(sqlite_metadata_store_test, expired_lease_removes_its_keys_at_the_ttl_exactly) {
    auto s = open_store();
    auto lease = *s->grant_lease(1000ms);
    auto other = *s->grant_lease(5000ms);
    auto v1 = *s->compare_and_set("nodes/n1", 0, "up", lease);
    auto v2 = *s->compare_and_set("nodes/n1/load", 0, "3", lease);
    ASSERT_TRUE(s->compare_and_set("nodes/n2", 0, "up", other));
    ASSERT_TRUE(s->compare_and_set("rules/r1", 0, "orders.*"));

    advance(999ms);
    EXPECT_TRUE((*s->get("nodes/n1")).has_value());
    advance(1ms);
    EXPECT_FALSE((*s->get("nodes/n1")).has_value());
    EXPECT_FALSE((*s->get("nodes/n1/load")).has_value());
    EXPECT_TRUE((*s->get("nodes/n2")).has_value());
    EXPECT_TRUE((*s->get("rules/r1")).has_value());

    auto changes = s->changes_since("nodes/n1", v2);
    ASSERT_TRUE(changes) << changes.error().description;
    ASSERT_EQ(changes->size(), 2u);
    EXPECT_EQ((*changes)[0].kind, change::erase);
    EXPECT_EQ((*changes)[0].kv.key, "nodes/n1");
    EXPECT_EQ((*changes)[1].kind, change::erase);
    EXPECT_EQ((*changes)[1].kv.key, "nodes/n1/load");
    EXPECT_GT((*changes)[0].kv.version, v2);
    EXPECT_GT((*changes)[1].kv.version, (*changes)[0].kv.version);
    EXPECT_EQ(*s->revision(), (*changes)[1].kv.version);
    (void)v1; // what an expired lease refuses afterwards: the contract suite
}

TEST_F(sqlite_metadata_store_test, sweep_happens_on_writes_to_other_keys) {
    auto s = open_store();
    auto lease = *s->grant_lease(100ms);
    auto v = *s->compare_and_set("nodes/n1", 0, "up", lease);
    advance(100ms);
    auto w = s->compare_and_set("other", 0, "x");
    ASSERT_TRUE(w);
    EXPECT_EQ(*w, v + 2); // the erase of nodes/n1 took revision v + 1
    auto changes = *s->changes_since("", v);
    ASSERT_EQ(changes.size(), 2u);
    EXPECT_EQ(changes[0].kind, change::erase);
    EXPECT_EQ(changes[0].kv.version, v + 1);
    EXPECT_EQ(changes[1].kind, change::put);
}

TEST_F(sqlite_metadata_store_test, changes_log_is_pruned_by_revisions_and_age) {
    auto o = options();
    o.keep_revisions = 5;
    o.keep_for = 60s;
    o.prune_every = 1;
    auto s = open_store(o);
    for (int i = 0; i < 20; ++i)
        ASSERT_TRUE(s->compare_and_set("k/" + std::to_string(i), 0, "v"));
    // All younger than keep_for: nothing pruned yet.
    EXPECT_EQ(s->changes_since("", 0)->size(), 20u);

    advance(61s);
    ASSERT_TRUE(s->compare_and_set("k/20", 0, "v"));
    EXPECT_EQ(*s->revision(), 21u);
    auto tail = s->changes_since("", 16);
    ASSERT_TRUE(tail) << tail.error().description;
    ASSERT_EQ(tail->size(), 5u);
    EXPECT_EQ(tail->front().kv.version, 17u);
    auto old = s->changes_since("", 15);
    ASSERT_FALSE(old);
    EXPECT_EQ(old.error().code, store_errc::invalid);
    EXPECT_NE(old.error().description.find("pruned"), std::string::npos) << old.error().description;
    // The keys themselves are untouched.
    EXPECT_EQ(s->list("k/")->size(), 21u);
}

TEST_F(sqlite_metadata_store_test, refuses_another_schema_version) {
    { ASSERT_NE(open_store(), nullptr); }
    raw_exec("UPDATE schema_version SET version = 99");
    auto s = sqlite_metadata_store::open(path_);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, store_errc::invalid);
    EXPECT_NE(s.error().description.find(path_), std::string::npos) << s.error().description;
    EXPECT_NE(s.error().description.find("schema version 99"), std::string::npos) << s.error().description;
}

TEST_F(sqlite_metadata_store_test, refuses_a_foreign_database) {
    raw_exec("CREATE TABLE orders(id INTEGER)");
    auto s = sqlite_metadata_store::open(path_);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, store_errc::invalid);
    EXPECT_NE(s.error().description.find("not a wharf metadata store"), std::string::npos)
        << s.error().description;
}

TEST_F(sqlite_metadata_store_test, refuses_a_file_that_is_not_a_database) {
    std::ofstream(path_) << std::string(4096, 'x');
    auto s = sqlite_metadata_store::open(path_);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, store_errc::io);
    EXPECT_NE(s.error().description.find(path_), std::string::npos) << s.error().description;
}

TEST_F(sqlite_metadata_store_test, bad_path_names_the_path) {
    std::string bad = (dir_ / "no-such-dir" / "meta.db").string();
    auto s = sqlite_metadata_store::open(bad);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, store_errc::io);
    EXPECT_NE(s.error().description.find(bad), std::string::npos) << s.error().description;
    EXPECT_EQ(sqlite_metadata_store::open("").error().code, store_errc::invalid);
}

} // namespace
} // namespace wharf::wlm
