// The metadata_store contract, run against every backend (store_fixture.hpp).
#include "wlm/metadata/tests/store_fixture.hpp"

#include <map>
#include <vector>

namespace wharf::wlm {
namespace {

using namespace std::chrono_literals;

TEST_P(metadata_store_contract, get_of_absent_key_is_empty) {
    auto s = open_any();
    auto r = s->get("owner/q");
    ASSERT_TRUE(r) << r.error().description;
    EXPECT_FALSE(r->has_value());
    EXPECT_TRUE(s->revision());
}

TEST_P(metadata_store_contract, compare_and_set_creates_if_absent_and_conflicts_on_stale_version) {
    auto s = open_any();
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
    EXPECT_GE(*s->revision(), *v2);
}

TEST_P(metadata_store_contract, versions_strictly_increase_across_keys) {
    auto s = open_any();
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

TEST_P(metadata_store_contract, values_are_bytes_and_keys_must_be_valid) {
    auto s = open_any();
    std::string bytes("a\0b\xff", 4);
    ASSERT_TRUE(s->compare_and_set("bin", 0, bytes));
    EXPECT_EQ((*s->get("bin"))->value, bytes);
    ASSERT_TRUE(s->compare_and_set("empty", 0, ""));
    EXPECT_EQ((*s->get("empty"))->value, "");

    EXPECT_EQ(s->compare_and_set("", 0, "x").error().code, store_errc::invalid);
    EXPECT_EQ(s->compare_and_set(std::string("a\0b", 3), 0, "x").error().code, store_errc::invalid);
    EXPECT_EQ(s->get("").error().code, store_errc::invalid);
}

TEST_P(metadata_store_contract, list_returns_keys_under_prefix_in_key_order) {
    auto s = open_any();
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

TEST_P(metadata_store_contract, list_prefix_ending_in_0xff) {
    auto s = open_any();
    for (std::string k : {std::string("a\xff"), std::string("a\xff\x01"), std::string("b"), std::string("a")})
        ASSERT_TRUE(s->compare_and_set(k, 0, "v"));
    auto r = s->list("a\xff");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].key, "a\xff");
    EXPECT_EQ((*r)[1].key, "a\xff\x01");
}

TEST_P(metadata_store_contract, compare_and_delete) {
    auto s = open_any();
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

TEST_P(metadata_store_contract, keep_alive_extends_a_lease) {
    auto s = open_any();
    auto lease = s->grant_lease(ttl);
    ASSERT_TRUE(lease) << lease.error().description;
    EXPECT_NE(*lease, 0);
    auto v = s->compare_and_set("nodes/n1", 0, "up", *lease);
    ASSERT_TRUE(v) << v.error().description;
    EXPECT_EQ((*s->get("nodes/n1"))->lease, *lease);

    for (int i = 0; i < 2; ++i) { // 1.5 ttl in all
        let_time_pass(ttl * 3 / 4);
        auto k = s->keep_alive(*lease);
        ASSERT_TRUE(k) << k.error().description;
        EXPECT_TRUE(*k);
        EXPECT_TRUE((*s->get("nodes/n1")).has_value());
    }
}

TEST_P(metadata_store_contract, lease_expiry_is_about_a_ttl_ahead_and_ends_with_the_lease) {
    auto s = open_any();
    auto lease = *s->grant_lease(ttl);
    const int64_t now = GetParam() == backend::sqlite
                            ? clock_->load()
                            : std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count();
    auto expiry = s->lease_expiry(lease);
    ASSERT_TRUE(expiry) << expiry.error().description;
    EXPECT_GT(*expiry, now);
    EXPECT_LE(*expiry, now + ttl.count() + 1000); // etcd counts whole seconds

    ASSERT_TRUE(*s->revoke_lease(lease));
    EXPECT_EQ(s->lease_expiry(lease).error().code, store_errc::lease_expired);
    EXPECT_FALSE(*s->revoke_lease(lease));
}

TEST_P(metadata_store_contract, expired_lease_removes_its_keys_with_erase_changes) {
    auto s = open_any();
    auto lease = *s->grant_lease(ttl);
    auto other = *s->grant_lease(ttl * 5);
    ASSERT_TRUE(s->compare_and_set("nodes/n1", 0, "up", lease));
    auto v2 = *s->compare_and_set("nodes/n1/load", 0, "3", lease);
    ASSERT_TRUE(s->compare_and_set("nodes/n2", 0, "up", other));
    ASSERT_TRUE(s->compare_and_set("rules/r1", 0, "orders.*"));

    expire(*s, lease);
    EXPECT_FALSE((*s->get("nodes/n1")).has_value());
    EXPECT_FALSE((*s->get("nodes/n1/load")).has_value());
    EXPECT_TRUE((*s->get("nodes/n2")).has_value());
    EXPECT_TRUE((*s->get("rules/r1")).has_value());

    auto c = changes(*s, "nodes/n1", v2, 2);
    ASSERT_EQ(c.size(), 2u);
    std::vector<std::string> keys{c[0].kv.key, c[1].kv.key};
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"nodes/n1", "nodes/n1/load"}));
    EXPECT_EQ(c[0].kind, change::erase);
    EXPECT_EQ(c[1].kind, change::erase);
    EXPECT_GT(c[0].kv.version, v2);
    EXPECT_GE(c[1].kv.version, c[0].kv.version);
    EXPECT_GE(*s->revision(), c[1].kv.version);

    auto k = s->keep_alive(lease);
    ASSERT_FALSE(k);
    EXPECT_EQ(k.error().code, store_errc::lease_expired);
    auto cas = s->compare_and_set("nodes/n1", 0, "up", lease);
    ASSERT_FALSE(cas);
    EXPECT_EQ(cas.error().code, store_errc::lease_expired);
    s->revoke_lease(other);
}

TEST_P(metadata_store_contract, compare_and_set_with_unknown_lease_is_lease_expired) {
    auto s = open_any();
    auto r = s->compare_and_set("nodes/n1", 0, "up", 12345);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, store_errc::lease_expired);
    EXPECT_EQ(s->keep_alive(12345).error().code, store_errc::lease_expired);
    EXPECT_EQ(s->grant_lease(0ms).error().code, store_errc::invalid);
    EXPECT_EQ(s->grant_lease(-5ms).error().code, store_errc::invalid);
}

TEST_P(metadata_store_contract, revoke_deletes_keys_and_lease_ids_are_not_reused) {
    auto s = open_any();
    auto lease = *s->grant_lease(10s);
    auto v = *s->compare_and_set("nodes/n1", 0, "up", lease);
    auto revoked = s->revoke_lease(lease);
    ASSERT_TRUE(revoked) << revoked.error().description;
    EXPECT_TRUE(*revoked);
    EXPECT_FALSE((*s->get("nodes/n1")).has_value());
    auto c = changes(*s, "nodes/", v, 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].kind, change::erase);
    EXPECT_EQ(c[0].kv.key, "nodes/n1");

    EXPECT_FALSE(*s->revoke_lease(lease));
    EXPECT_EQ(s->keep_alive(lease).error().code, store_errc::lease_expired);
    auto next = *s->grant_lease(10s);
    EXPECT_NE(next, lease);
    s->revoke_lease(next);
}

TEST_P(metadata_store_contract, set_without_lease_detaches_key_from_lease) {
    auto s = open_any();
    auto lease = *s->grant_lease(ttl);
    auto v = *s->compare_and_set("k", 0, "leased", lease);
    ASSERT_TRUE(s->compare_and_set("k", v, "kept"));
    expire(*s, lease);
    auto got = *s->get("k");
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, "kept");
    EXPECT_EQ(got->lease, 0);
}

TEST_P(metadata_store_contract, changes_since_returns_puts_and_erases_in_order_under_prefix) {
    auto s = open_any();
    auto lease = *s->grant_lease(ttl);
    auto r1 = *s->compare_and_set("a/1", 0, "x1");
    auto r2 = *s->compare_and_set("b/1", 0, "y1");
    auto r3 = *s->compare_and_set("a/2", 0, "x2", lease);
    auto r4 = *s->compare_and_set("a/1", r1, "x1'");
    ASSERT_TRUE(*s->compare_and_delete("a/1", r4));
    expire(*s, lease); // a/2 goes with its lease

    struct expect_t {
        change::kind_t kind;
        std::string key, value;
    };
    std::vector<expect_t> want{{change::put, "a/1", "x1"},
                               {change::put, "a/2", "x2"},
                               {change::put, "a/1", "x1'"},
                               {change::erase, "a/1", ""},
                               {change::erase, "a/2", ""}};
    auto all = changes(*s, "a/", 0, want.size());
    ASSERT_EQ(all.size(), want.size());
    uint64_t last = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(all[i].kind, want[i].kind) << i;
        EXPECT_EQ(all[i].kv.key, want[i].key) << i;
        EXPECT_EQ(all[i].kv.value, want[i].value) << i;
        EXPECT_GT(all[i].kv.version, last) << i;
        last = all[i].kv.version;
    }
    EXPECT_EQ(all[0].kv.version, r1);
    EXPECT_EQ(all[1].kv.version, r3);
    EXPECT_EQ(all[1].kv.lease, lease);

    auto tail = changes(*s, "a/", r3, 3);
    ASSERT_EQ(tail.size(), 3u);
    EXPECT_EQ(tail[0].kv.version, r4);

    auto b = changes(*s, "b/", 0, 1);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].kv.version, r2);
    auto none = s->changes_since("", *s->revision());
    ASSERT_TRUE(none) << none.error().description;
    EXPECT_TRUE(none->empty());
}

TEST_P(metadata_store_contract, two_stores_see_each_others_writes) {
    auto s1 = open_any();
    auto s2 = open_any();
    auto v1 = *s1->compare_and_set("owner/q", 0, "n1");
    auto seen = *s2->get("owner/q");
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->value, "n1");
    EXPECT_EQ(s2->compare_and_set("owner/q", 0, "n2").error().code, store_errc::conflict);
    auto v2 = *s2->compare_and_set("owner/q", v1, "n2");
    EXPECT_EQ((*s1->get("owner/q"))->value, "n2");
    EXPECT_GE(*s1->revision(), v2);

    // Leases are shared too: one store grants and the other renews; expiry
    // seen by either removes the keys for both.
    auto lease = *s1->grant_lease(ttl);
    ASSERT_TRUE(s1->compare_and_set("nodes/n1", 0, "up", lease));
    let_time_pass(ttl * 3 / 4);
    EXPECT_TRUE(*s2->keep_alive(lease));
    let_time_pass(ttl * 3 / 4);
    EXPECT_TRUE((*s1->get("nodes/n1")).has_value());
    expire(*s2, lease);
    EXPECT_FALSE((*s2->get("nodes/n1")).has_value());
    EXPECT_FALSE((*s1->get("nodes/n1")).has_value());
    auto erases = changes(*s1, "nodes/", v2, 2);
    ASSERT_EQ(erases.size(), 2u);
    EXPECT_EQ(erases[1].kind, change::erase);
}

TEST_P(metadata_store_contract, reopening_keeps_state) {
    uint64_t v = 0;
    lease_id lease = 0;
    {
        auto s = open_any();
        lease = *s->grant_lease(10s);
        v = *s->compare_and_set("owner/q", 0, "n1", lease);
    }
    auto s = open_any();
    EXPECT_EQ((*s->get("owner/q"))->version, v);
    EXPECT_TRUE(*s->keep_alive(lease));
    EXPECT_GE(*s->revision(), v);
    s->revoke_lease(lease);
}

TEST_P(metadata_store_contract, create_many_creates_the_absent_keys_and_leaves_the_others) {
    auto s = open_any();
    auto before = s->compare_and_set("owner/b", 0, "n9");
    ASSERT_TRUE(before) << before.error().description;
    const uint64_t start = *s->revision();
    auto made = s->create_many({{"owner/a", "n1"}, {"owner/b", "n2"}, {"owner/c", "n3"}});
    ASSERT_TRUE(made) << made.error().description;
    ASSERT_EQ(made->size(), 3u);
    ASSERT_TRUE((*made)[0] && (*made)[2]);
    EXPECT_FALSE((*made)[1]); // it existed: left as it was
    EXPECT_GT(*(*made)[0], start);
    EXPECT_GE(*(*made)[2], *(*made)[0]); // etcd: one txn, one revision
    EXPECT_EQ((*s->get("owner/a"))->value, "n1");
    EXPECT_EQ((*s->get("owner/a"))->version, *(*made)[0]);
    EXPECT_EQ((*s->get("owner/b"))->value, "n9");
    EXPECT_EQ((*s->get("owner/b"))->version, *before);
    EXPECT_EQ((*s->get("owner/c"))->value, "n3");
    EXPECT_EQ((*s->get("owner/c"))->version, *(*made)[2]);
    // Other nodes learn of them as of any write: through the change feed.
    std::vector<std::string> keys;
    for (const auto& c : changes(*s, "owner/", start, 2)) keys.push_back(c.kv.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"owner/a", "owner/c"}));
    // Each version is the key's own: the next compare_and_set goes by it.
    EXPECT_TRUE(s->compare_and_set("owner/c", *(*made)[2], "n4"));

    auto bad = s->create_many({{"", "x"}});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, store_errc::invalid);
}

TEST_P(metadata_store_contract, create_many_of_hundreds_with_some_taken) {
    // More keys than one etcd txn may hold, some of them taken already.
    auto s = open_any();
    std::vector<metadata_store::new_key> kvs;
    for (int i = 0; i < 150; ++i) {
        const std::string key = "owner/q" + std::to_string(i);
        if (i % 7 == 3) {
            ASSERT_TRUE(s->compare_and_set(key, 0, "taken"));
        }
        kvs.emplace_back(key, "n" + std::to_string(i));
    }
    auto made = s->create_many(kvs);
    ASSERT_TRUE(made) << made.error().description;
    ASSERT_EQ(made->size(), kvs.size());
    for (int i = 0; i < 150; ++i) {
        const bool taken = i % 7 == 3;
        EXPECT_EQ((*made)[i].has_value(), !taken) << i;
        auto got = s->get(kvs[i].first);
        ASSERT_TRUE(got && got->has_value()) << i;
        EXPECT_EQ((*got)->value, taken ? "taken" : kvs[i].second) << i;
    }
    auto all = s->list("owner/");
    ASSERT_TRUE(all);
    EXPECT_EQ(all->size(), 150u);
}

INSTANTIATE_TEST_SUITE_P(backends, metadata_store_contract, ::testing::Values(backend::sqlite, backend::etcd),
                         backend_name);

} // namespace
} // namespace wharf::wlm
