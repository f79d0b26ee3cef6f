#pragma once
// The fixtures of the metadata store tests: sqlite_metadata_store_test for
// what only the sqlite backend does, and metadata_store_contract, the
// metadata_store contract run against every backend (sqlite, and etcd: a
// real 3-member cluster per test process, each test under a key prefix of
// its own).

#include "wlm/metadata/etcd_metadata_store.hpp"
#include "wlm/metadata/sqlite_metadata_store.hpp"
#include "wlm/metadata/tests/etcd_cluster.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace wharf::wlm {

// A fresh directory per test, a store file inside it, and a clock the test
// moves by hand.
class sqlite_metadata_store_test : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (std::filesystem::temp_directory_path() / "wharf-meta-XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
        dir_ = tmpl;
        path_ = (dir_ / "meta.db").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    sqlite_store_options options() {
        sqlite_store_options o;
        o.now_ms = [clock = clock_] { return clock->load(); };
        return o;
    }
    std::unique_ptr<sqlite_metadata_store> open_store(sqlite_store_options o) {
        auto s = sqlite_metadata_store::open(path_, std::move(o));
        EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().description);
        return s ? std::move(s).value() : nullptr;
    }
    std::unique_ptr<sqlite_metadata_store> open_store() { return open_store(options()); }
    void advance(std::chrono::milliseconds d) { *clock_ += d.count(); }

    // Runs SQL on the file through a connection of its own.
    void raw_exec(const std::string& sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
        char* err = nullptr;
        EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
        sqlite3_free(err);
        sqlite3_close(db);
    }

    std::filesystem::path dir_;
    std::string path_;
    std::shared_ptr<std::atomic<int64_t>> clock_ = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
};

enum class backend { sqlite, etcd };

// The contract: what holds for every backend. Time: sqlite's clock is the
// test's (let_time_pass moves it); etcd's cannot be injected, so there
// let_time_pass lets real time pass, and expire() polls (with a deadline)
// until etcd has expired the lease. Changes: a backend may deliver them
// shortly after the write (etcd's come through a watch), so tests poll.
class metadata_store_contract : public sqlite_metadata_store_test, public ::testing::WithParamInterface<backend> {
  protected:
    static test::etcd_cluster& etcd() {
        static test::etcd_cluster cluster(3); // stopped at exit
        return cluster;
    }

    void SetUp() override {
        sqlite_metadata_store_test::SetUp();
        if (GetParam() == backend::etcd) {
            ASSERT_EQ(etcd().start_error(), "");
            static int n = 0;
            std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
            std::replace(name.begin(), name.end(), '/', '.');
            prefix_ = "/wharf-test/" + name + "-" + std::to_string(++n) + "/";
        }
    }

    std::unique_ptr<metadata_store> open_any() {
        if (GetParam() == backend::sqlite) return open_store();
        auto s = etcd_metadata_store::open(etcd().spec(prefix_));
        EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().description);
        return s ? std::move(s).value() : nullptr;
    }

    // A lease TTL both backends honour closely (etcd's unit is the second).
    static constexpr std::chrono::milliseconds ttl{2000};

    void let_time_pass(std::chrono::milliseconds d) {
        if (GetParam() == backend::sqlite) advance(d);
        else std::this_thread::sleep_for(d); // etcd's clock is real: pace renewals by it
    }

    // Until the store has expired `lease` (sqlite: at once, by moving the clock).
    void expire(metadata_store& s, lease_id lease) {
        if (GetParam() == backend::sqlite) {
            advance(ttl);
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + ttl + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < deadline) {
            auto e = s.lease_expiry(lease);
            if (!e && e.error().code == store_errc::lease_expired) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50)); // poll interval
        }
        ADD_FAILURE() << "lease " << lease << " did not expire";
    }

    // changes_since, polled until it returns at least `n` changes (or the deadline).
    std::vector<change> changes(metadata_store& s, std::string_view prefix, uint64_t after, size_t n) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        std::vector<change> got;
        for (;;) {
            auto r = s.changes_since(prefix, after);
            if (r) got = *r;
            if (got.size() >= n || std::chrono::steady_clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20)); // poll interval
        }
        EXPECT_GE(got.size(), n) << "changes under '" << prefix << "' after " << after;
        return got;
    }

    std::string prefix_;
};

inline std::string backend_name(const ::testing::TestParamInfo<backend>& p) {
    return p.param == backend::sqlite ? "sqlite" : "etcd";
}

} // namespace wharf::wlm
