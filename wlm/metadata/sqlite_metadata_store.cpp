#include "wlm/metadata/sqlite_metadata_store.hpp"

#include "broker/common/text.hpp"
#include "wlm/metadata/sqlite_connection.hpp"

#include <algorithm>
#include <climits>
#include <thread>

namespace wharf::wlm {

using detail::sqlite_connection;
using detail::sqlite_failure;
using detail::sqlite_query;
using detail::sqlite_statement;
using detail::sqlite_transaction;

namespace {

// Schema version 1. `meta` holds the store-wide revision and `compacted`, the
// highest revision pruned from `changes`. Every revision is exactly one row
// of `changes`. AUTOINCREMENT keeps lease ids from being reused after a lease
// is deleted, so a stale id can never renew someone else's lease.
constexpr const char* schema_sql = R"sql(
CREATE TABLE schema_version(version INTEGER NOT NULL);
CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE kv(
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX kv_by_lease ON kv(lease);
CREATE TABLE leases(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ttl_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL
);
CREATE INDEX leases_by_expiry ON leases(expires_at_ms);
CREATE TABLE changes(
  revision INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  kind INTEGER NOT NULL,
  value BLOB,
  lease INTEGER NOT NULL,
  at_ms INTEGER NOT NULL
);
INSERT INTO meta(name, value) VALUES ('revision', 0), ('compacted', 0);
)sql";

constexpr int64_t kind_put = 0;
constexpr int64_t kind_erase = 1;

// Longest lease accepted: far beyond any heartbeat, and far from overflow.
constexpr std::chrono::milliseconds max_ttl = std::chrono::hours(24 * 365);

int64_t system_now_ms() {
    // system_clock is CLOCK_REALTIME on Linux: shared by every process on the host.
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool valid_key(std::string_view key) { return !key.empty() && key.find('\0') == std::string_view::npos; }

// The smallest string above every string that starts with `prefix`, or none
// (empty prefix, or a prefix of 0xff bytes only).
std::optional<std::string> prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff)
        end.pop_back();
    if (end.empty())
        return std::nullopt;
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    return end;
}

} // namespace

struct sqlite_metadata_store::impl {
    // Prepared once, after the schema exists.
    struct statements {
        explicit statements(sqlite_connection& db)
            : revision_get(db, "SELECT value FROM meta WHERE name = 'revision'"),
              revision_bump(db, "UPDATE meta SET value = value + 1 WHERE name = 'revision' RETURNING value"),
              compacted_get(db, "SELECT value FROM meta WHERE name = 'compacted'"),
              compacted_set(db, "UPDATE meta SET value = ?1 WHERE name = 'compacted'"),
              change_insert(db, "INSERT INTO changes(revision, key, kind, value, lease, at_ms) "
                                "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
              changes_first_young(db, "SELECT revision FROM changes WHERE revision <= ?1 AND at_ms >= ?2 "
                                      "ORDER BY revision LIMIT 1"),
              changes_prune(db, "DELETE FROM changes WHERE revision <= ?1"),
              changes_select(db, "SELECT revision, key, kind, value, lease FROM changes "
                                 "WHERE revision > ?1 AND key >= ?2 AND (?3 IS NULL OR key < ?3) "
                                 "ORDER BY revision"),
              kv_get(db, "SELECT value, version, lease FROM kv WHERE key = ?1"),
              kv_list(db, "SELECT key, value, version, lease FROM kv "
                          "WHERE key >= ?1 AND (?2 IS NULL OR key < ?2) ORDER BY key"),
              kv_put(db, "INSERT INTO kv(key, value, version, lease) VALUES (?1, ?2, ?3, ?4) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
                         "version = excluded.version, lease = excluded.lease"),
              kv_delete(db, "DELETE FROM kv WHERE key = ?1"),
              kv_keys_of_lease(db, "SELECT key FROM kv WHERE lease = ?1 ORDER BY key"),
              leases_expired(db, "SELECT id FROM leases WHERE expires_at_ms <= ?1 ORDER BY id"),
              leases_any_expired(db, "SELECT EXISTS (SELECT 1 FROM leases WHERE expires_at_ms <= ?1)"),
              lease_live(db, "SELECT 1 FROM leases WHERE id = ?1 AND expires_at_ms > ?2"),
              lease_expiry(db, "SELECT expires_at_ms FROM leases WHERE id = ?1 AND expires_at_ms > ?2"),
              lease_insert(db, "INSERT INTO leases(ttl_ms, expires_at_ms) VALUES (?1, ?2)"),
              lease_renew(db, "UPDATE leases SET expires_at_ms = ?2 + ttl_ms "
                              "WHERE id = ?1 AND expires_at_ms > ?2 RETURNING id"),
              lease_delete(db, "DELETE FROM leases WHERE id = ?1") {}

        sqlite_statement revision_get, revision_bump, compacted_get, compacted_set;
        sqlite_statement change_insert, changes_first_young, changes_prune, changes_select;
        sqlite_statement kv_get, kv_list, kv_put, kv_delete, kv_keys_of_lease;
        sqlite_statement leases_expired, leases_any_expired, lease_live, lease_expiry, lease_insert, lease_renew,
            lease_delete;
    };

    impl(const std::string& path, sqlite_store_options o) : options(std::move(o)), db(path, options.busy_timeout) {
        if (!options.now_ms)
            options.now_ms = system_now_ms;
        options.prune_every = std::max<uint64_t>(options.prune_every, 1);
        use_wal();
        db.exec("PRAGMA synchronous = FULL", "setting synchronous = FULL");
        init_schema();
        st = std::make_unique<statements>(db);
    }

    sqlite_store_options options;
    sqlite_connection db;
    std::unique_ptr<statements> st;

    std::string describe(std::string_view op, std::string_view what) const {
        return "metadata store " + quoted(db.path()) + ": " + std::string(op) + ": " + std::string(what);
    }
    failure<store_error> error(store_errc code, std::string_view op, std::string_view what) const {
        return fail(store_error{code, describe(op, what)});
    }

    // Runs f, turning a failed SQLite call into a store_error naming the file
    // and the operation.
    template <class F> auto guarded(std::string_view op, F&& f) -> decltype(f()) {
        try {
            return f();
        } catch (const sqlite_failure& e) {
            return error(e.code, op, e.what);
        }
    }

    // One write transaction: sweep expired leases, run f(now), prune the
    // changes log, commit — also when f reports a conflict, so the sweep
    // sticks.
    template <class F> auto write(F&& f) -> decltype(f(int64_t{})) {
        sqlite_transaction txn(db, sqlite_transaction::mode::write);
        const int64_t now = options.now_ms();
        const uint64_t before = current_revision();
        sweep(now);
        auto r = f(now);
        prune(now, before);
        txn.commit();
        return r;
    }

    // One read snapshot, after sweeping expired leases if there are any.
    template <class F> auto read(F&& f) -> decltype(f()) {
        if (any_expired(options.now_ms()))
            write([](int64_t) { return 0; });
        sqlite_transaction txn(db, sqlite_transaction::mode::read);
        auto r = f();
        txn.commit();
        return r;
    }

    // Switching a new file to WAL needs an exclusive lock, and SQLite answers
    // SQLITE_BUSY at once, without the busy handler, while another process
    // does the same; so retry here until the busy timeout.
    void use_wal() {
        const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
        for (;;) {
            try {
                sqlite_statement pragma(db, "PRAGMA journal_mode = WAL");
                sqlite_query q(pragma);
                std::string mode = q.step() ? q.text(0) : std::string();
                if (mode != "wal")
                    throw sqlite_failure{store_errc::io, "cannot use WAL mode (journal mode is '" + mode +
                                                             "'); the file must be on a local file system"};
                return;
            } catch (const sqlite_failure& e) {
                if (e.code != store_errc::unavailable || std::chrono::steady_clock::now() >= deadline)
                    throw;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }

    void init_schema() {
        sqlite_transaction txn(db, sqlite_transaction::mode::write);
        std::vector<std::string> tables;
        {
            sqlite_statement s(db, "SELECT name FROM sqlite_schema WHERE type = 'table' "
                                   "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name");
            sqlite_query q(s);
            while (q.step())
                tables.push_back(q.text(0));
        }
        if (tables.empty()) {
            db.exec(schema_sql, "creating the schema");
            sqlite_statement s(db, "INSERT INTO schema_version(version) VALUES (?1)");
            sqlite_query(s).bind(1, schema_version).run();
        } else if (std::find(tables.begin(), tables.end(), "schema_version") == tables.end()) {
            std::string names;
            for (const auto& t : tables)
                names += (names.empty() ? "" : ", ") + t;
            throw sqlite_failure{store_errc::invalid, "not a wharf metadata store: it has tables (" + names +
                                                          ") but no schema_version table"};
        } else {
            std::vector<int64_t> versions;
            sqlite_statement s(db, "SELECT version FROM schema_version");
            sqlite_query q(s);
            while (q.step())
                versions.push_back(q.int64(0));
            if (versions.size() != 1 || versions[0] != schema_version) {
                std::string found = versions.size() == 1 ? std::to_string(versions[0])
                                                         : std::to_string(versions.size()) + " version rows";
                throw sqlite_failure{store_errc::invalid,
                                     "schema version " + found + " is not the one this wharfd understands (" +
                                         std::to_string(schema_version) +
                                         "); use a matching wharfd or another file"};
            }
        }
        txn.commit();
    }

    uint64_t current_revision() {
        sqlite_query q(st->revision_get);
        q.step();
        return static_cast<uint64_t>(q.int64(0));
    }

    uint64_t compacted() {
        sqlite_query q(st->compacted_get);
        q.step();
        return static_cast<uint64_t>(q.int64(0));
    }

    // Appends one change with a new revision; returns the revision.
    uint64_t record(int64_t kind, std::string_view key, std::string_view value, lease_id lease, int64_t now) {
        int64_t rev = 0;
        {
            sqlite_query q(st->revision_bump);
            q.step();
            rev = q.int64(0);
        }
        sqlite_query q(st->change_insert);
        q.bind(1, rev).bind_text(2, key).bind(3, kind).bind(5, lease).bind(6, now);
        if (kind == kind_put)
            q.bind_blob(4, value);
        else
            q.bind_null(4);
        q.run();
        return static_cast<uint64_t>(rev);
    }

    void erase(const std::string& key, lease_id lease, int64_t now) {
        record(kind_erase, key, {}, lease, now);
        sqlite_query(st->kv_delete).bind_text(1, key).run();
    }

    // Deletes the lease and its keys, each key an erase change.
    void drop_lease(lease_id id, int64_t now) {
        std::vector<std::string> keys;
        {
            sqlite_query q(st->kv_keys_of_lease);
            q.bind(1, id);
            while (q.step())
                keys.push_back(q.text(0));
        }
        for (const auto& key : keys)
            erase(key, id, now);
        sqlite_query(st->lease_delete).bind(1, id).run();
    }

    bool any_expired(int64_t now) {
        sqlite_query q(st->leases_any_expired);
        q.bind(1, now);
        q.step();
        return q.int64(0) != 0;
    }

    void sweep(int64_t now) {
        std::vector<lease_id> expired;
        {
            sqlite_query q(st->leases_expired);
            q.bind(1, now);
            while (q.step())
                expired.push_back(q.int64(0));
        }
        for (lease_id id : expired)
            drop_lease(id, now);
    }

    bool lease_live(lease_id id, int64_t now) {
        sqlite_query q(st->lease_live);
        q.bind(1, id).bind(2, now);
        return q.step();
    }

    // Prunes the changes log when the revision crossed a multiple of
    // prune_every in this transaction. Keeps the last keep_revisions
    // revisions and every change younger than keep_for; what is pruned is
    // always a prefix 1..compacted.
    void prune(int64_t now, uint64_t before) {
        const uint64_t now_rev = current_revision();
        if (now_rev / options.prune_every == before / options.prune_every || now_rev <= options.keep_revisions)
            return;
        uint64_t limit = now_rev - options.keep_revisions;
        {
            sqlite_query q(st->changes_first_young);
            q.bind(1, static_cast<int64_t>(limit)).bind(2, now - options.keep_for.count());
            if (q.step())
                limit = std::min(limit, static_cast<uint64_t>(q.int64(0)) - 1);
        }
        if (limit <= compacted())
            return;
        sqlite_query(st->changes_prune).bind(1, static_cast<int64_t>(limit)).run();
        sqlite_query(st->compacted_set).bind(1, static_cast<int64_t>(limit)).run();
    }

    std::optional<key_value> get(std::string_view key) {
        sqlite_query q(st->kv_get);
        q.bind_text(1, key);
        if (!q.step())
            return std::nullopt;
        return key_value{std::string(key), q.blob(0), static_cast<uint64_t>(q.int64(1)), q.int64(2)};
    }
};

sqlite_metadata_store::sqlite_metadata_store(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
sqlite_metadata_store::~sqlite_metadata_store() = default;

result<std::unique_ptr<sqlite_metadata_store>, store_error> sqlite_metadata_store::open(const std::string& path) {
    return open(path, sqlite_store_options{});
}

result<std::unique_ptr<sqlite_metadata_store>, store_error>
sqlite_metadata_store::open(const std::string& path, std::function<int64_t()> now_ms) {
    sqlite_store_options options;
    options.now_ms = std::move(now_ms);
    return open(path, std::move(options));
}

result<std::unique_ptr<sqlite_metadata_store>, store_error> sqlite_metadata_store::open(const std::string& path,
                                                                                      sqlite_store_options options) {
    auto describe = [&](std::string_view what) {
        return "metadata store " + quoted(path) + ": open: " + std::string(what);
    };
    if (path.empty())
        return fail(store_error{store_errc::invalid, describe("the path is empty")});
    if (options.busy_timeout.count() < 0 || options.busy_timeout.count() > INT_MAX)
        return fail(store_error{store_errc::invalid, describe("busy_timeout out of range")});
    try {
        auto state = std::make_unique<impl>(path, std::move(options));
        return std::unique_ptr<sqlite_metadata_store>(new sqlite_metadata_store(std::move(state)));
    } catch (const sqlite_failure& e) {
        return fail(store_error{e.code, describe(e.what)});
    }
}

result<std::optional<key_value>, store_error> sqlite_metadata_store::get(std::string_view key) {
    using R = result<std::optional<key_value>, store_error>;
    if (!valid_key(key))
        return impl_->error(store_errc::invalid, "get", "the key is empty or contains a NUL byte");
    return impl_->guarded("get " + quoted(key), [&]() -> R { return impl_->read([&] { return impl_->get(key); }); });
}

result<std::vector<key_value>, store_error> sqlite_metadata_store::list(std::string_view prefix) {
    using R = result<std::vector<key_value>, store_error>;
    return impl_->guarded("list " + quoted(prefix), [&]() -> R {
        return impl_->read([&] {
            std::vector<key_value> out;
            auto end = prefix_end(prefix);
            sqlite_query q(impl_->st->kv_list);
            q.bind_text(1, prefix);
            if (end)
                q.bind_text(2, *end);
            while (q.step())
                out.push_back(key_value{q.text(0), q.blob(1), static_cast<uint64_t>(q.int64(2)), q.int64(3)});
            return out;
        });
    });
}

result<uint64_t, store_error> sqlite_metadata_store::compare_and_set(std::string_view key, uint64_t expected,
                                                                     std::string_view value, lease_id lease) {
    using R = result<uint64_t, store_error>;
    const std::string op = "compare_and_set " + quoted(key);
    if (!valid_key(key))
        return impl_->error(store_errc::invalid, op, "the key is empty or contains a NUL byte");
    return impl_->guarded(op, [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            if (lease != 0 && !impl_->lease_live(lease, now))
                return impl_->error(store_errc::lease_expired, op,
                                    "lease " + std::to_string(lease) + " has expired or was revoked");
            auto current = impl_->get(key);
            uint64_t found = current ? current->version : 0;
            if (found != expected)
                return impl_->error(store_errc::conflict, op,
                                    "expected version " + std::to_string(expected) + ", found " +
                                        (current ? std::to_string(found) : std::string("no key")));
            uint64_t rev = impl_->record(kind_put, key, value, lease, now);
            sqlite_query(impl_->st->kv_put)
                .bind_text(1, key)
                .bind_blob(2, value)
                .bind(3, static_cast<int64_t>(rev))
                .bind(4, lease)
                .run();
            return rev;
        });
    });
}

// All in one write transaction: a burst of new queues costs one sync, not one each.
result<std::vector<std::optional<uint64_t>>, store_error>
sqlite_metadata_store::create_many(const std::vector<new_key>& kvs) {
    using R = result<std::vector<std::optional<uint64_t>>, store_error>;
    const std::string op = "create_many (" + std::to_string(kvs.size()) + " keys)";
    for (const auto& kv : kvs)
        if (!valid_key(kv.first))
            return impl_->error(store_errc::invalid, op, "key " + quoted(kv.first) + " is empty or contains a NUL byte");
    return impl_->guarded(op, [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            std::vector<std::optional<uint64_t>> out;
            out.reserve(kvs.size());
            for (const auto& [key, value] : kvs) {
                if (impl_->get(key)) {
                    out.emplace_back(std::nullopt);
                    continue;
                }
                const uint64_t rev = impl_->record(kind_put, key, value, 0, now);
                sqlite_query(impl_->st->kv_put)
                    .bind_text(1, key)
                    .bind_blob(2, value)
                    .bind(3, static_cast<int64_t>(rev))
                    .bind(4, lease_id{0})
                    .run();
                out.emplace_back(rev);
            }
            return out;
        });
    });
}

result<bool, store_error> sqlite_metadata_store::compare_and_delete(std::string_view key, uint64_t expected) {
    using R = result<bool, store_error>;
    const std::string op = "compare_and_delete " + quoted(key);
    if (!valid_key(key))
        return impl_->error(store_errc::invalid, op, "the key is empty or contains a NUL byte");
    return impl_->guarded(op, [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            auto current = impl_->get(key);
            if (!current) {
                if (expected == 0)
                    return false;
                return impl_->error(store_errc::conflict, op,
                                    "expected version " + std::to_string(expected) + ", found no key");
            }
            if (current->version != expected)
                return impl_->error(store_errc::conflict, op,
                                    "expected version " + std::to_string(expected) + ", found " +
                                        std::to_string(current->version));
            impl_->erase(current->key, current->lease, now);
            return true;
        });
    });
}

result<lease_id, store_error> sqlite_metadata_store::grant_lease(std::chrono::milliseconds ttl) {
    using R = result<lease_id, store_error>;
    if (ttl.count() <= 0 || ttl > max_ttl)
        return impl_->error(store_errc::invalid, "grant_lease",
                            "ttl " + std::to_string(ttl.count()) + " ms is not in 1 ms .. 365 days");
    return impl_->guarded("grant_lease", [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            sqlite_query(impl_->st->lease_insert).bind(1, ttl.count()).bind(2, now + ttl.count()).run();
            return static_cast<lease_id>(sqlite3_last_insert_rowid(impl_->db.raw()));
        });
    });
}

result<bool, store_error> sqlite_metadata_store::keep_alive(lease_id id) {
    using R = result<bool, store_error>;
    const std::string op = "keep_alive " + std::to_string(id);
    return impl_->guarded(op, [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            sqlite_query q(impl_->st->lease_renew);
            q.bind(1, id).bind(2, now);
            if (!q.step())
                return impl_->error(store_errc::lease_expired, op,
                                    "the lease has expired or was revoked; its keys are gone");
            return true;
        });
    });
}

result<bool, store_error> sqlite_metadata_store::revoke_lease(lease_id id) {
    using R = result<bool, store_error>;
    return impl_->guarded("revoke_lease " + std::to_string(id), [&]() -> R {
        return impl_->write([&](int64_t now) -> R {
            if (!impl_->lease_live(id, now))
                return false;
            impl_->drop_lease(id, now);
            return true;
        });
    });
}

result<int64_t, store_error> sqlite_metadata_store::lease_expiry(lease_id id) {
    using R = result<int64_t, store_error>;
    const std::string op = "lease_expiry " + std::to_string(id);
    return impl_->guarded(op, [&]() -> R {
        return impl_->read([&]() -> R {
            sqlite_query q(impl_->st->lease_expiry);
            q.bind(1, id).bind(2, impl_->options.now_ms());
            if (!q.step())
                return impl_->error(store_errc::lease_expired, op, "the lease has expired or was revoked");
            return q.int64(0);
        });
    });
}

result<uint64_t, store_error> sqlite_metadata_store::revision() {
    using R = result<uint64_t, store_error>;
    return impl_->guarded("revision", [&]() -> R { return impl_->read([&] { return impl_->current_revision(); }); });
}

result<std::vector<change>, store_error> sqlite_metadata_store::changes_since(std::string_view prefix,
                                                                              uint64_t after) {
    using R = result<std::vector<change>, store_error>;
    const std::string op = "changes_since " + quoted(prefix) + " after " + std::to_string(after);
    return impl_->guarded(op, [&]() -> R {
        return impl_->read([&]() -> R {
            uint64_t pruned = impl_->compacted();
            if (after < pruned)
                return impl_->error(store_errc::invalid, op,
                                    "changes up to revision " + std::to_string(pruned) +
                                        " were pruned from the log; list() the keys again and follow "
                                        "changes from revision()");
            std::vector<change> out;
            auto end = prefix_end(prefix);
            sqlite_query q(impl_->st->changes_select);
            q.bind(1, static_cast<int64_t>(std::min<uint64_t>(after, INT64_MAX))).bind_text(2, prefix);
            if (end)
                q.bind_text(3, *end);
            while (q.step()) {
                change c{q.int64(2) == kind_put ? change::put : change::erase,
                         key_value{q.text(1), q.blob(3), static_cast<uint64_t>(q.int64(0)), q.int64(4)}};
                out.push_back(std::move(c));
            }
            return out;
        });
    });
}

} // namespace wharf::wlm
