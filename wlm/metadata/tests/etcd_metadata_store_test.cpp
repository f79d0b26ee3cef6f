// What only the etcd backend does: the spec, the prefix, failing over and
// failing fast, the watch across a member's death, compaction.
#include "wlm/metadata/etcd_http.hpp"
#include "wlm/metadata/open_metadata_store.hpp"
#include "wlm/metadata/tests/store_fixture.hpp"

#include "broker/common/testing/free_port.hpp"

#include <functional>

namespace wharf::wlm {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A port nothing listens on (bound, then closed).
uint16_t closed_port() { return test_support::free_port(); }

std::unique_ptr<metadata_store> open_or_fail(const std::string& spec) {
    auto s = open_metadata_store(spec);
    EXPECT_TRUE(s) << (s ? "" : s.error().description);
    return s ? std::move(s).value() : nullptr;
}

TEST(open_metadata_store, takes_sqlite_and_etcd_and_names_the_key_otherwise) {
    auto bad = open_metadata_store("zookeeper://h:1");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, store_errc::invalid);
    EXPECT_EQ(bad.error().description.rfind("metadata: ", 0), 0u) << bad.error().description;
    EXPECT_NE(bad.error().description.find("etcd://HOST:PORT"), std::string::npos);
    auto no_port = open_metadata_store("etcd://localhost");
    ASSERT_FALSE(no_port);
    EXPECT_NE(no_port.error().description.find("HOST:PORT"), std::string::npos) << no_port.error().description;
    EXPECT_TRUE(open_metadata_store("etcd://a:1,b:2/cluster-a")); // connects lazily
}

TEST(etcd_spec, endpoints_and_prefix) {
    auto o = etcd_metadata_store::parse_spec("etcd://10.0.0.1:2379,[::1]:2380,etcd.example:2381/prod/eu");
    ASSERT_TRUE(o) << o.error();
    EXPECT_EQ(o->endpoints, (std::vector<std::string>{"10.0.0.1:2379", "::1:2380", "etcd.example:2381"}));
    EXPECT_EQ(o->prefix, "/prod/eu/");
    EXPECT_EQ(etcd_metadata_store::parse_spec("etcd://h:1")->prefix, "/wharf/");
    EXPECT_EQ(etcd_metadata_store::parse_spec("etcd://h:1/")->prefix, "/wharf/");
    EXPECT_FALSE(etcd_metadata_store::parse_spec("etcd://h:0"));
    EXPECT_FALSE(etcd_metadata_store::parse_spec("etcd://h:x/p"));
    EXPECT_FALSE(etcd_metadata_store::parse_spec("etcd:///p"));
}

TEST(etcd_store, unreachable_endpoints_fail_fast_as_unavailable) {
    // A closed port refuses at once; a port that listens but never answers
    // (a hung member) is cut off by the request timeout.
    const int hung = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(bind(hung, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(hung, 16), 0);
    getsockname(hung, reinterpret_cast<sockaddr*>(&a), &len);
    struct closer {
        int fd;
        ~closer() { close(fd); }
    } close_hung{hung};
    auto s = open_or_fail("etcd://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + ",127.0.0.1:" +
                          std::to_string(closed_port()));
    ASSERT_TRUE(s);
    for (int i = 0; i < 2; ++i) {
        const auto t0 = steady::now();
        auto r = s->get("k");
        const auto took = steady::now() - t0;
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().code, store_errc::unavailable);
        EXPECT_NE(r.error().description.find("no etcd endpoint answered"), std::string::npos)
            << r.error().description;
        EXPECT_LT(took, 2s);
    }
    auto c = s->changes_since("", 0);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, store_errc::unavailable);
}

class etcd_store_test : public metadata_store_contract {};

TEST_P(etcd_store_test, fails_over_past_a_dead_endpoint_and_keeps_to_its_prefix) {
    auto& e = etcd();
    auto s = open_or_fail("etcd://127.0.0.1:" + std::to_string(closed_port()) + "," + e.endpoints() + prefix_ + "a");
    auto other = open_or_fail(e.spec(prefix_ + "b"));
    ASSERT_TRUE(s && other);
    ASSERT_TRUE(s->compare_and_set("owner/q", 0, "n1"));
    EXPECT_EQ((*s->get("owner/q"))->value, "n1");
    EXPECT_FALSE((*other->get("owner/q")).has_value());
    EXPECT_TRUE(other->list("")->empty());
    EXPECT_EQ(s->list("")->size(), 1u);
}

// A cluster of its own: compacting the shared one would break the contract
// tests' changes_since from revision 0.
TEST(etcd_store_compaction, compacted_history_is_invalid_so_the_caller_reloads) {
    test::etcd_cluster cluster(1);
    ASSERT_EQ(cluster.start_error(), "");
    auto s = open_or_fail(cluster.spec("/c/"));
    ASSERT_TRUE(s);
    auto v = *s->compare_and_set("k", 0, "1");
    ASSERT_TRUE(s->compare_and_set("k", v, "2"));
    const uint64_t now = *s->revision();
    detail::etcd_http_client http({{"127.0.0.1", cluster.client_port(0)}}, 2s, 500ms);
    auto r = http.post("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(now) + "\",\"physical\":true}");
    ASSERT_TRUE(r) << r.error();
    ASSERT_EQ(r->status, 200u) << r->body;
    // etcd tells the watch about the compaction shortly after creating it.
    result<std::vector<change>, store_error> old = std::vector<change>{};
    const auto deadline = steady::now() + 10s;
    while (old && steady::now() < deadline) {
        old = s->changes_since("", v - 1);
        if (old) std::this_thread::sleep_for(20ms); // poll interval
    }
    ASSERT_FALSE(old);
    EXPECT_EQ(old.error().code, store_errc::invalid);
    EXPECT_NE(old.error().description.find("compacted"), std::string::npos) << old.error().description;
    auto fresh = s->changes_since("", now);
    ASSERT_TRUE(fresh) << fresh.error().description;
    EXPECT_TRUE(fresh->empty());
}

INSTANTIATE_TEST_SUITE_P(etcd, etcd_store_test, ::testing::Values(backend::etcd), backend_name);

// A cluster of its own: these tests kill or stop members. `fault` takes
// member 0 out (the watch is on it), `heal` brings it back.
void watch_moves_on_when_its_member_fails(const std::function<void(test::etcd_cluster&)>& fault,
                                          const std::function<void(test::etcd_cluster&)>& heal) {
    test::etcd_cluster cluster(3);
    ASSERT_EQ(cluster.start_error(), "");
    // The watching store talks to member 0 first; the writer to member 1.
    auto watcher = open_or_fail(cluster.spec("/w/"));
    auto writer = open_or_fail("etcd://127.0.0.1:" + std::to_string(cluster.client_port(1)) + "/w/");
    ASSERT_TRUE(watcher && writer);
    const uint64_t start = *watcher->revision();
    ASSERT_TRUE(writer->compare_and_set("a", 0, "1"));
    auto wait_for = [&](size_t n) {
        std::vector<change> got;
        const auto deadline = steady::now() + 10s;
        while (steady::now() < deadline) {
            if (auto r = watcher->changes_since("", start); r) got = *r;
            if (got.size() >= n) break;
            std::this_thread::sleep_for(20ms); // poll interval
        }
        return got;
    };
    ASSERT_EQ(wait_for(1).size(), 1u);
    fault(cluster);
    // If member 0 led, the others elect a new leader first: write until it
    // takes (a conflict: an earlier try took, its answer lost).
    auto write = [&](const char* key, const char* value) {
        const auto deadline = steady::now() + 10s;
        for (;;) {
            auto r = writer->compare_and_set(key, 0, value);
            if (r || r.error().code == store_errc::conflict) return true;
            if (steady::now() >= deadline) return false;
            std::this_thread::sleep_for(50ms); // retry interval
        }
    };
    ASSERT_TRUE(write("b", "2"));
    ASSERT_TRUE(write("c", "3"));
    auto got = wait_for(3);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].kv.key, "a");
    EXPECT_EQ(got[1].kv.key, "b");
    EXPECT_EQ(got[2].kv.key, "c");
    EXPECT_TRUE(watcher->get("c")); // unary calls fail over too
    heal(cluster);
    EXPECT_TRUE(cluster.wait_healthy(20s));
}

TEST(etcd_watch, resumes_on_another_member_without_losing_or_repeating_changes) {
    watch_moves_on_when_its_member_fails([](test::etcd_cluster& c) { c.kill(0); },
                                         [](test::etcd_cluster& c) { c.start(0); });
}

// A stopped member keeps its connections open and sends nothing: only the
// watch's probe can tell it from a quiet cluster.
TEST(etcd_watch, leaves_a_member_that_stopped_answering_with_its_connection_open) {
    watch_moves_on_when_its_member_fails([](test::etcd_cluster& c) { c.freeze(0); },
                                         [](test::etcd_cluster& c) { c.thaw(0); });
}

} // namespace
} // namespace wharf::wlm
