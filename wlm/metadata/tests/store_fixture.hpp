#pragma once
// The fixture the sqlite_metadata_store tests share.

#include "wlm/metadata/sqlite_metadata_store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

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

} // namespace wharf::wlm
