#include "wlm/metadata/tests/store_fixture.hpp"

#include <fstream>
#include <map>
#include <vector>

namespace wharf::wlm {
namespace {

using namespace std::chrono_literals;

TEST_F(sqlite_metadata_store_test, get_of_absent_key_is_empty) {
    auto s = open_store();
    auto r = s->get("owner/q");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_value());
    EXPECT_EQ(*s->revision(), 0u);
}

TEST_F(sqlite_metadata_store_test, compare_and_set_creates_if_absent_and_conflicts_on_stale_version) {
    auto s = open_store();
    auto v1 = s->compare_and_set("owner/q", 0, "n1");
    ASSERT_TRUE(v1) << v1.error().description;
    auto again = s->compare_and_set("owner/q", 0, "n2");
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, store_errc::conflict);

    auto v2 = s->compare_and_set("owner/q", *v1, "n2");
    ASSERT_TRUE(v2);
    EXPECT_GT(*v2, *v1);
    auto stale = s->compare_and_set("owner/q", *v1, "n3");
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error().code, store_errc::conflict);
    EXPECT_NE(stale.error().description.find("owner/q"), std::string::npos) << stale.error().description;

    auto absent = s->compare_and_set("owner/other", 7, "x");
    ASSERT_FALSE(absent);
    EXPECT_EQ(absent.error().code, store_errc::conflict);

    auto got = s->get("owner/q");
    ASSERT_TRUE(got && got->has_value());
    EXPECT_EQ((*got)->value, "n2");
    EXPECT_EQ((*got)->version, *v2);
    EXPECT_EQ((*got)->lease, 0);
    EXPECT_EQ(*s->revision(), *v2);
}

TEST_F(sqlite_metadata_store_test, versions_strictly_increase_across_keys) {
    auto s = open_store();
    uint64_t last = 0;
    std::map<std::string, uint64_t> version_of;
    for (int i = 0; i < 10; ++i) {
        std::string key = "k/" + std::to_string(i % 3);
        auto v = s->compare_and_set(key, version_of[key], "v" + std::to_string(i));
        ASSERT_TRUE(v) << v.error().description;
        EXPECT_GT(*v, last);
        last = version_of[key] = *v;
    }
}

TEST_F(sqlite_metadata_store_test, values_are_bytes_and_keys_must_be_valid) {
    auto s = open_store();
    std::string bytes("a\0b\xff", 4);
    ASSERT_TRUE(s->compare_and_set("bin", 0, bytes));
    EXPECT_EQ((*s->get("bin"))->value, bytes);
    ASSERT_TRUE(s->compare_and_set("empty", 0, ""));
    EXPECT_EQ((*s->get("empty"))->value, "");

    EXPECT_EQ(s->compare_and_set("", 0, "x").error().code, store_errc::invalid);
    EXPECT_EQ(s->compare_and_set(std::string("a\0b", 3), 0, "x").error().code, store_errc::invalid);
    EXPECT_EQ(s->get("").error().code, store_errc::invalid);
}

TEST_F(sqlite_metadata_store_test, list_returns_keys_under_prefix_in_key_order) {
    auto s = open_store();
    for (const char* k : {"nodes/n2", "a0", "nodes/n1", "nodes", "nodes/n1/x", "owner/q", "nodes0"})
        ASSERT_TRUE(s->compare_and_set(k, 0, std::string("v:") + k));
    auto r = s->list("nodes/");
    ASSERT_TRUE(r);
    std::vector<std::string> keys;
    for (const auto& kv : *r) {
        keys.push_back(kv.key);
        EXPECT_EQ(kv.value, "v:" + kv.key);
    }
    EXPECT_EQ(keys, (std::vector<std::string>{"nodes/n1", "nodes/n1/x", "nodes/n2"}));
    EXPECT_EQ(s->list("")->size(), 7u);
    EXPECT_TRUE(s->list("zzz")->empty());
}

TEST_F(sqlite_metadata_store_test, list_prefix_ending_in_0xff) {
    auto s = open_store();
    for (std::string k : {std::string("a\xff"), std::string("a\xff\x01"), std::string("b"), std::string("a")})
        ASSERT_TRUE(s->compare_and_set(k, 0, "v"));
    auto r = s->list("a\xff");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].key, "a\xff");
    EXPECT_EQ((*r)[1].key, "a\xff\x01");
}

TEST_F(sqlite_metadata_store_test, compare_and_delete) {
    auto s = open_store();
    auto v1 = *s->compare_and_set("owner/q", 0, "n1");
    auto v2 = *s->compare_and_set("owner/q", v1, "n2");

    auto stale = s->compare_and_delete("owner/q", v1);
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error().code, store_errc::conflict);
    EXPECT_TRUE((*s->get("owner/q")).has_value());

    auto ok = s->compare_and_delete("owner/q", v2);
    ASSERT_TRUE(ok) << ok.error().description;
    EXPECT_TRUE(*ok);
    EXPECT_FALSE((*s->get("owner/q")).has_value());
    EXPECT_GT(*s->revision(), v2);

    auto absent = s->compare_and_delete("owner/q", 0);
    ASSERT_TRUE(absent);
    EXPECT_FALSE(*absent);
    EXPECT_EQ(s->compare_and_delete("owner/q", v2).error().code, store_errc::conflict);

    // Recreating after a delete starts again from "absent".
    auto v3 = s->compare_and_set("owner/q", 0, "n3");
    ASSERT_TRUE(v3);
    EXPECT_GT(*v3, v2);
}

TEST_F(sqlite_metadata_store_test, keep_alive_extends_a_lease) {
    auto s = open_store();
    auto lease = s->grant_lease(1000ms);
    ASSERT_TRUE(lease) << lease.error().description;
    EXPECT_NE(*lease, 0);
    auto v = s->compare_and_set("nodes/n1", 0, "up", *lease);
    ASSERT_TRUE(v) << v.error().description;
    EXPECT_EQ((*s->get("nodes/n1"))->lease, *lease);

    for (int i = 0; i < 5; ++i) {
        advance(900ms);
        auto k = s->keep_alive(*lease);
        ASSERT_TRUE(k) << k.error().description;
        EXPECT_TRUE(*k);
        EXPECT_TRUE((*s->get("nodes/n1")).has_value());
    }
}

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

TEST_F(sqlite_metadata_store_test, expired_lease_removes_its_keys_with_erase_changes) {
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

    auto k = s->keep_alive(lease);
    ASSERT_FALSE(k);
    EXPECT_EQ(k.error().code, store_errc::lease_expired);
    auto cas = s->compare_and_set("nodes/n1", 0, "up", lease);
    ASSERT_FALSE(cas);
    EXPECT_EQ(cas.error().code, store_errc::lease_expired);
    (void)v1;
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

TEST_F(sqlite_metadata_store_test, compare_and_set_with_unknown_lease_is_lease_expired) {
    auto s = open_store();
    auto r = s->compare_and_set("nodes/n1", 0, "up", 12345);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, store_errc::lease_expired);
    EXPECT_EQ(s->keep_alive(12345).error().code, store_errc::lease_expired);
    EXPECT_EQ(s->grant_lease(0ms).error().code, store_errc::invalid);
    EXPECT_EQ(s->grant_lease(-5ms).error().code, store_errc::invalid);
}

TEST_F(sqlite_metadata_store_test, revoke_deletes_keys_and_lease_ids_are_not_reused) {
    auto s = open_store();
    auto lease = *s->grant_lease(10s);
    auto v = *s->compare_and_set("nodes/n1", 0, "up", lease);
    auto revoked = s->revoke_lease(lease);
    ASSERT_TRUE(revoked) << revoked.error().description;
    EXPECT_TRUE(*revoked);
    EXPECT_FALSE((*s->get("nodes/n1")).has_value());
    auto changes = *s->changes_since("nodes/", v);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].kind, change::erase);
    EXPECT_EQ(changes[0].kv.key, "nodes/n1");

    EXPECT_FALSE(*s->revoke_lease(lease));
    EXPECT_EQ(s->keep_alive(lease).error().code, store_errc::lease_expired);
    auto next = *s->grant_lease(10s);
    EXPECT_GT(next, lease);
}

TEST_F(sqlite_metadata_store_test, set_without_lease_detaches_key_from_lease) {
    auto s = open_store();
    auto lease = *s->grant_lease(1s);
    auto v = *s->compare_and_set("k", 0, "leased", lease);
    ASSERT_TRUE(s->compare_and_set("k", v, "kept"));
    advance(2s);
    auto got = *s->get("k");
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, "kept");
    EXPECT_EQ(got->lease, 0);
}

TEST_F(sqlite_metadata_store_test, changes_since_returns_puts_and_erases_in_order_under_prefix) {
    auto s = open_store();
    auto lease = *s->grant_lease(1s);
    auto r1 = *s->compare_and_set("a/1", 0, "x1");
    auto r2 = *s->compare_and_set("b/1", 0, "y1");
    auto r3 = *s->compare_and_set("a/2", 0, "x2", lease);
    auto r4 = *s->compare_and_set("a/1", r1, "x1'");
    ASSERT_TRUE(*s->compare_and_delete("a/1", r4));
    advance(1s); // a/2 goes with its lease

    auto all = s->changes_since("a/", 0);
    ASSERT_TRUE(all) << all.error().description;
    struct expect_t {
        change::kind_t kind;
        std::string key, value;
    };
    std::vector<expect_t> want{{change::put, "a/1", "x1"},
                               {change::put, "a/2", "x2"},
                               {change::put, "a/1", "x1'"},
                               {change::erase, "a/1", ""},
                               {change::erase, "a/2", ""}};
    ASSERT_EQ(all->size(), want.size());
    uint64_t last = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ((*all)[i].kind, want[i].kind) << i;
        EXPECT_EQ((*all)[i].kv.key, want[i].key) << i;
        EXPECT_EQ((*all)[i].kv.value, want[i].value) << i;
        EXPECT_GT((*all)[i].kv.version, last) << i;
        last = (*all)[i].kv.version;
    }
    EXPECT_EQ((*all)[0].kv.version, r1);
    EXPECT_EQ((*all)[1].kv.version, r3);
    EXPECT_EQ((*all)[1].kv.lease, lease);

    auto tail = *s->changes_since("a/", r3);
    ASSERT_EQ(tail.size(), 3u);
    EXPECT_EQ(tail[0].kv.version, r4);

    auto b = *s->changes_since("b/", 0);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].kv.version, r2);
    EXPECT_TRUE(s->changes_since("", *s->revision())->empty());
}

TEST_F(sqlite_metadata_store_test, two_stores_on_one_file_see_each_others_writes) {
    auto s1 = open_store();
    auto s2 = open_store();
    auto v1 = *s1->compare_and_set("owner/q", 0, "n1");
    auto seen = *s2->get("owner/q");
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->value, "n1");
    EXPECT_EQ(s2->compare_and_set("owner/q", 0, "n2").error().code, store_errc::conflict);
    auto v2 = *s2->compare_and_set("owner/q", v1, "n2");
    EXPECT_EQ((*s1->get("owner/q"))->value, "n2");
    EXPECT_EQ(*s1->revision(), v2);

    // Leases are shared too: one store grants and the other renews; expiry
    // seen by either removes the keys for both.
    auto lease = *s1->grant_lease(1s);
    ASSERT_TRUE(s1->compare_and_set("nodes/n1", 0, "up", lease));
    advance(900ms);
    EXPECT_TRUE(*s2->keep_alive(lease));
    advance(900ms);
    EXPECT_TRUE((*s1->get("nodes/n1")).has_value());
    advance(200ms);
    EXPECT_FALSE((*s2->get("nodes/n1")).has_value());
    EXPECT_FALSE((*s1->get("nodes/n1")).has_value());
    auto erases = *s1->changes_since("nodes/", v2);
    ASSERT_EQ(erases.size(), 2u);
    EXPECT_EQ(erases[1].kind, change::erase);
}

TEST_F(sqlite_metadata_store_test, reopening_keeps_state) {
    uint64_t v = 0;
    lease_id lease = 0;
    {
        auto s = open_store();
        lease = *s->grant_lease(10s);
        v = *s->compare_and_set("owner/q", 0, "n1", lease);
    }
    auto s = open_store();
    EXPECT_EQ((*s->get("owner/q"))->version, v);
    EXPECT_TRUE(*s->keep_alive(lease));
    EXPECT_EQ(*s->revision(), v);
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
