#pragma once
// sqlite_connection: the thin RAII layer over SQLite's C API that
// sqlite_metadata_store is written on — one connection, its prepared
// statements, transactions that roll back unless committed, and the mapping
// of SQLite result codes to store_errc.
//
// Private to wlm/metadata (it includes <sqlite3.h>, which nothing outside
// this folder sees). Failures are thrown as sqlite_failure and turned into
// store_error at the public methods of sqlite_metadata_store; no exception
// leaves this folder. One thread at a time per connection.

#include "wlm/metadata/metadata_store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace wharf::wlm::detail {

// A failed SQLite call: the store_errc it maps to and what failed, without
// the file name (the store adds it).
struct sqlite_failure {
    store_errc code;
    std::string what;
};

class sqlite_connection {
  public:
    // Opens (creating if missing) the database file at `path`. Throws
    // sqlite_failure.
    sqlite_connection(const std::string& path, std::chrono::milliseconds busy_timeout);

    sqlite3* raw() const { return db_.get(); }
    const std::string& path() const { return path_; }
    std::chrono::milliseconds busy_timeout() const { return busy_timeout_; }

    // Runs SQL without results (DDL, PRAGMA, BEGIN/COMMIT). Throws sqlite_failure.
    void exec(const char* sql, std::string_view what);
    // Throws the sqlite_failure for result code `rc` of the step `what`.
    [[noreturn]] void fail(int rc, std::string_view what) const;

  private:
    struct closer {
        void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
    };
    std::string path_;
    std::chrono::milliseconds busy_timeout_;
    std::unique_ptr<sqlite3, closer> db_;
};

// A statement prepared once and reused; use it through sqlite_query.
class sqlite_statement {
  public:
    sqlite_statement(sqlite_connection& db, const char* sql);
    sqlite3_stmt* raw() const { return stmt_.get(); }
    sqlite_connection& db() const { return *db_; }
    const char* sql() const { return sqlite3_sql(stmt_.get()); }

  private:
    struct finalizer {
        void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
    };
    sqlite_connection* db_;
    std::unique_ptr<sqlite3_stmt, finalizer> stmt_;
};

// One execution of a prepared statement: bind (1-based), step, read columns
// (0-based). Resets the statement and its bindings when it goes out of scope,
// so that no statement keeps a read snapshot open.
class sqlite_query {
  public:
    explicit sqlite_query(sqlite_statement& s) : s_(s) {}
    ~sqlite_query();
    sqlite_query(const sqlite_query&) = delete;
    sqlite_query& operator=(const sqlite_query&) = delete;

    sqlite_query& bind(int index, int64_t value);
    sqlite_query& bind_text(int index, std::string_view value);
    sqlite_query& bind_blob(int index, std::string_view value);
    sqlite_query& bind_null(int index);

    // true: a row is ready; false: done. Throws sqlite_failure.
    bool step();
    // Steps once and expects no row (INSERT/UPDATE/DELETE).
    void run();

    int64_t int64(int column) const;
    bool is_null(int column) const;
    std::string text(int column) const;
    std::string blob(int column) const;

  private:
    sqlite_statement& s_;
};

// BEGIN IMMEDIATE (writes: takes the file's write lock up front, so a
// read-then-write sequence is atomic across processes) or BEGIN (reads: one
// consistent snapshot). Rolls back on destruction unless committed.
class sqlite_transaction {
  public:
    enum class mode { read, write };
    sqlite_transaction(sqlite_connection& db, mode m);
    ~sqlite_transaction();
    sqlite_transaction(const sqlite_transaction&) = delete;
    sqlite_transaction& operator=(const sqlite_transaction&) = delete;

    void commit();

  private:
    sqlite_connection& db_;
    bool open_ = false;
};

} // namespace wharf::wlm::detail
