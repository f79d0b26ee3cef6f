#include "wlm/metadata/sqlite_connection.hpp"

namespace wharf::wlm::detail {

namespace {

store_errc code_for(int rc) {
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return store_errc::unavailable;
    case SQLITE_TOOBIG:
        return store_errc::invalid;
    default:
        return store_errc::io;
    }
}

} // namespace

sqlite_connection::sqlite_connection(const std::string& path, std::chrono::milliseconds busy_timeout)
    : path_(path), busy_timeout_(busy_timeout) {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(db); // closed even when the open failed
    if (rc != SQLITE_OK) {
        if (db == nullptr)
            throw sqlite_failure{store_errc::io, "cannot open the file: out of memory"};
        fail(rc, "cannot open the file");
    }
    sqlite3_extended_result_codes(db, 1);
    rc = sqlite3_busy_timeout(db, static_cast<int>(busy_timeout.count()));
    if (rc != SQLITE_OK)
        fail(rc, "setting the busy timeout");
}

void sqlite_connection::exec(const char* sql, std::string_view what) {
    int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK)
        fail(rc, what);
}

void sqlite_connection::fail(int rc, std::string_view what) const {
    std::string text(what);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
        text += ": the file stayed locked by another connection for more than " +
                std::to_string(busy_timeout_.count()) + " ms";
    }
    text += ": ";
    // sqlite3_errmsg describes the most recent failure on this connection,
    // which is this one; sqlite3_errstr is the generic text for the code.
    const char* msg = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
    text += msg;
    text += " (";
    text += sqlite3_errstr(rc);
    text += ", code " + std::to_string(rc) + ")";
    throw sqlite_failure{code_for(rc), std::move(text)};
}

sqlite_statement::sqlite_statement(sqlite_connection& db, const char* sql) : db_(&db) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db.raw(), sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    stmt_.reset(stmt);
    if (rc != SQLITE_OK)
        db.fail(rc, std::string("preparing \"") + sql + "\"");
}

sqlite_query::~sqlite_query() {
    sqlite3_reset(s_.raw());
    sqlite3_clear_bindings(s_.raw());
}

sqlite_query& sqlite_query::bind(int index, int64_t value) {
    int rc = sqlite3_bind_int64(s_.raw(), index, value);
    if (rc != SQLITE_OK)
        s_.db().fail(rc, std::string("binding a value for \"") + s_.sql() + "\"");
    return *this;
}

sqlite_query& sqlite_query::bind_text(int index, std::string_view value) {
    int rc = sqlite3_bind_text64(s_.raw(), index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    if (rc != SQLITE_OK)
        s_.db().fail(rc, std::string("binding a value for \"") + s_.sql() + "\"");
    return *this;
}

sqlite_query& sqlite_query::bind_blob(int index, std::string_view value) {
    // A zero-length blob must not be bound from a null pointer: that binds NULL.
    static const char empty = 0;
    const char* data = value.empty() ? &empty : value.data();
    int rc = sqlite3_bind_blob64(s_.raw(), index, data, value.size(), SQLITE_TRANSIENT);
    if (rc != SQLITE_OK)
        s_.db().fail(rc, std::string("binding a value for \"") + s_.sql() + "\"");
    return *this;
}

sqlite_query& sqlite_query::bind_null(int index) {
    int rc = sqlite3_bind_null(s_.raw(), index);
    if (rc != SQLITE_OK)
        s_.db().fail(rc, std::string("binding a value for \"") + s_.sql() + "\"");
    return *this;
}

bool sqlite_query::step() {
    int rc = sqlite3_step(s_.raw());
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    s_.db().fail(rc, std::string("running \"") + s_.sql() + "\"");
}

void sqlite_query::run() {
    while (step()) {
    }
}

int64_t sqlite_query::int64(int column) const { return sqlite3_column_int64(s_.raw(), column); }

bool sqlite_query::is_null(int column) const { return sqlite3_column_type(s_.raw(), column) == SQLITE_NULL; }

std::string sqlite_query::text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_.raw(), column));
    int n = sqlite3_column_bytes(s_.raw(), column);
    return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

std::string sqlite_query::blob(int column) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(s_.raw(), column));
    int n = sqlite3_column_bytes(s_.raw(), column);
    return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

sqlite_transaction::sqlite_transaction(sqlite_connection& db, mode m) : db_(db) {
    if (m == mode::write)
        db_.exec("BEGIN IMMEDIATE", "starting a write transaction (BEGIN IMMEDIATE)");
    else
        db_.exec("BEGIN", "starting a read transaction");
    open_ = true;
}

sqlite_transaction::~sqlite_transaction() {
    if (open_)
        sqlite3_exec(db_.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void sqlite_transaction::commit() {
    db_.exec("COMMIT", "committing");
    open_ = false;
}

} // namespace wharf::wlm::detail
