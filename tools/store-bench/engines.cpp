#include "tools/store-bench/engines.hpp"

#include "broker/store/journal_store.hpp"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sqlite3.h>
#ifdef STORE_BENCH_LMDB
#include <lmdb.h>
#endif

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace store_bench {

using wharf::engine::message_ref;
using wharf::engine::queue_entry;

namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

queue_entry entry_of(uint64_t seq, std::string_view body) {
    queue_entry e;
    e.seq = seq;
    e.body = message_ref::copy_of(body);
    e.durable = true;
    e.persistent = true;
    return e;
}

// queue name + big-endian seq: key order is queue order.
std::string key_of(uint64_t seq) {
    std::string k(queue_name);
    for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((seq >> (i * 8)) & 0xff));
    return k;
}

uint64_t seq_of_key(std::string_view k) {
    uint64_t s = 0;
    for (size_t i = k.size() - 8; i < k.size(); ++i) s = (s << 8) | static_cast<unsigned char>(k[i]);
    return s;
}

// ---------------------------------------------------------------- journal

class journal_engine final : public engine {
  public:
    journal_engine(const std::string& dir, size_t body_size, bool pipelined)
        : body_(body_size, '\0'), pipelined_(pipelined) {
        wharf::store::journal_options o;
        o.dir = dir;
        o.node_id = "store-bench";
        wharf::store::recovery_report report;
        auto r = wharf::store::journal_store::open(o, report);
        if (!r) throw std::runtime_error("journal: " + r.error());
        store_ = std::move(r.value());
        store_->set_synced_callback([this](uint64_t epoch, bool ok, const std::string& why) {
            std::lock_guard lock(mu_);
            if (!ok) failure_ = why;
            synced_ = std::max(synced_, epoch);
            ++syncs_;
            cv_.notify_all();
        });
    }
    ~journal_engine() override {
        drain();
        store_.reset();
    }

    void batch(uint64_t enq_first, uint32_t enq_n, uint64_t rm_first, uint32_t rm_n) override {
        for (uint64_t s = enq_first; s < enq_first + enq_n; ++s) {
            queue_entry e;
            e.seq = s;
            e.durable = true;
            e.persistent = true;
            if (s < bodies_.size()) {
                e.body = bodies_[s];
            } else {
                make_body(s, body_.data(), body_.size());
                e.body = message_ref::copy_of(body_);
            }
            store_->on_enqueue(queue_name, e);
        }
        for (uint64_t s = rm_first; s < rm_first + rm_n; ++s) store_->on_remove(queue_name, s);
        const uint64_t epoch = store_->commit();
        if (epoch == 0) return;
        // Pipelined: this batch is on its way; what must be durable before
        // the next batch is built is the one before it (as in the broker,
        // where the engine keeps running while a sync is in flight).
        wait(pipelined_ ? last_ : epoch);
        last_ = epoch;
    }
    void drain() override { wait(last_); }
    void prepare(uint64_t last_seq) override {
        bodies_.clear();
        bodies_.resize(last_seq + 1);
        for (uint64_t s = 1; s <= last_seq; ++s) {
            make_body(s, body_.data(), body_.size());
            bodies_[s] = message_ref::copy_of(body_);
        }
    }
    uint64_t syncs() const override {
        std::lock_guard lock(mu_);
        return syncs_;
    }

  private:
    void wait(uint64_t epoch) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return synced_ >= epoch || !failure_.empty(); });
        if (!failure_.empty()) throw std::runtime_error("journal: " + failure_);
    }

    std::string body_;
    std::vector<message_ref> bodies_; // by seq, from prepare()
    bool pipelined_;
    std::unique_ptr<wharf::store::journal_store> store_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    uint64_t synced_ = 0;
    uint64_t syncs_ = 0;
    uint64_t last_ = 0;
    std::string failure_;
};

recovered recover_journal(const std::string& dir) {
    recovered out;
    const auto t0 = clock_type::now();
    wharf::store::journal_options o;
    o.dir = dir;
    o.node_id = "store-bench";
    wharf::store::recovery_report report;
    auto r = wharf::store::journal_store::open(o, report);
    if (!r) throw std::runtime_error("journal: " + r.error());
    out.queues = std::move(report.queues);
    out.seconds = since(t0);
    return out;
}

// ----------------------------------------------------------------- SQLite

void sqlite_check(sqlite3* db, int rc, const char* what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        throw std::runtime_error(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db));
}

sqlite3* sqlite_open(const std::string& dir) {
    sqlite3* db = nullptr;
    const std::string path = dir + "/store.db";
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        std::string why = db ? sqlite3_errmsg(db) : "out of memory";
        sqlite3_close(db);
        throw std::runtime_error("sqlite open " + path + ": " + why);
    }
    // WAL, and every commit synced (synchronous=FULL syncs the WAL on each
    // commit; NORMAL would not).
    sqlite_check(db, sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr, nullptr),
                 "pragmas");
    return db;
}

sqlite3_stmt* sqlite_prepare(sqlite3* db, const char* sql) {
    sqlite3_stmt* st = nullptr;
    sqlite_check(db, sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr), sql);
    return st;
}

void sqlite_run(sqlite3* db, sqlite3_stmt* st, const char* what) {
    sqlite_check(db, sqlite3_step(st), what);
    sqlite3_reset(st);
}

class sqlite_engine final : public engine {
  public:
    sqlite_engine(const std::string& dir, size_t body_size, bool rowid) : body_(body_size, '\0') {
        db_ = sqlite_open(dir);
        const std::string create =
            std::string("CREATE TABLE IF NOT EXISTS msgs (queue TEXT, seq INTEGER, body BLOB, "
                        "PRIMARY KEY(queue, seq))") +
            (rowid ? "" : " WITHOUT ROWID");
        sqlite_check(db_, sqlite3_exec(db_, create.c_str(), nullptr, nullptr, nullptr), "create");
        begin_ = sqlite_prepare(db_, "BEGIN");
        commit_ = sqlite_prepare(db_, "COMMIT");
        insert_ = sqlite_prepare(db_, "INSERT INTO msgs (queue, seq, body) VALUES (?1, ?2, ?3)");
        delete_ = sqlite_prepare(db_, "DELETE FROM msgs WHERE queue = ?1 AND seq = ?2");
    }
    ~sqlite_engine() override {
        for (sqlite3_stmt* st : {begin_, commit_, insert_, delete_}) sqlite3_finalize(st);
        sqlite3_close(db_);
    }

    void batch(uint64_t enq_first, uint32_t enq_n, uint64_t rm_first, uint32_t rm_n) override {
        sqlite_run(db_, begin_, "begin");
        for (uint64_t s = enq_first; s < enq_first + enq_n; ++s) {
            make_body(s, body_.data(), body_.size());
            sqlite3_bind_text(insert_, 1, queue_name.data(), static_cast<int>(queue_name.size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert_, 2, static_cast<sqlite3_int64>(s));
            sqlite3_bind_blob(insert_, 3, body_.data(), static_cast<int>(body_.size()), SQLITE_STATIC);
            sqlite_run(db_, insert_, "insert");
        }
        for (uint64_t s = rm_first; s < rm_first + rm_n; ++s) {
            sqlite3_bind_text(delete_, 1, queue_name.data(), static_cast<int>(queue_name.size()), SQLITE_STATIC);
            sqlite3_bind_int64(delete_, 2, static_cast<sqlite3_int64>(s));
            sqlite_run(db_, delete_, "delete");
        }
        sqlite_run(db_, commit_, "commit");
        ++syncs_;
    }
    uint64_t syncs() const override { return syncs_; }

  private:
    std::string body_;
    sqlite3* db_ = nullptr;
    sqlite3_stmt* begin_ = nullptr;
    sqlite3_stmt* commit_ = nullptr;
    sqlite3_stmt* insert_ = nullptr;
    sqlite3_stmt* delete_ = nullptr;
    uint64_t syncs_ = 0;
};

recovered recover_sqlite(const std::string& dir) {
    recovered out;
    const auto t0 = clock_type::now();
    sqlite3* db = sqlite_open(dir);
    sqlite3_stmt* st = sqlite_prepare(db, "SELECT queue, seq, body FROM msgs ORDER BY queue, seq");
    std::string current;
    std::vector<queue_entry>* entries = nullptr;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        std::string_view q(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                           static_cast<size_t>(sqlite3_column_bytes(st, 0)));
        if (!entries || q != current) {
            current = q;
            entries = &out.queues.emplace_back(current, std::vector<queue_entry>{}).second;
        }
        const uint64_t seq = static_cast<uint64_t>(sqlite3_column_int64(st, 1));
        std::string_view body(static_cast<const char*>(sqlite3_column_blob(st, 2)),
                              static_cast<size_t>(sqlite3_column_bytes(st, 2)));
        entries->push_back(entry_of(seq, body));
    }
    sqlite_check(db, rc, "select");
    out.seconds = since(t0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

// ---------------------------------------------------------------- RocksDB

rocksdb::DB* rocks_open(const std::string& dir) {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir, &db);
    if (!s.ok()) throw std::runtime_error("rocksdb open: " + s.ToString());
    return db;
}

class rocks_engine final : public engine {
  public:
    rocks_engine(const std::string& dir, size_t body_size) : body_(body_size, '\0'), db_(rocks_open(dir)) {
        wo_.sync = true; // the WAL is synced before Write returns
    }
    ~rocks_engine() override { delete db_; }

    void batch(uint64_t enq_first, uint32_t enq_n, uint64_t rm_first, uint32_t rm_n) override {
        rocksdb::WriteBatch b;
        for (uint64_t s = enq_first; s < enq_first + enq_n; ++s) {
            make_body(s, body_.data(), body_.size());
            b.Put(key_of(s), body_);
        }
        for (uint64_t s = rm_first; s < rm_first + rm_n; ++s) b.Delete(key_of(s));
        rocksdb::Status st = db_->Write(wo_, &b);
        if (!st.ok()) throw std::runtime_error("rocksdb write: " + st.ToString());
        ++syncs_;
    }
    uint64_t syncs() const override { return syncs_; }

  private:
    std::string body_;
    rocksdb::DB* db_;
    rocksdb::WriteOptions wo_;
    uint64_t syncs_ = 0;
};

recovered recover_rocks(const std::string& dir) {
    recovered out;
    const auto t0 = clock_type::now();
    std::unique_ptr<rocksdb::DB> db(rocks_open(dir));
    {
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
        std::string current;
        std::vector<queue_entry>* entries = nullptr;
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
            const rocksdb::Slice k = it->key();
            std::string_view q(k.data(), k.size() - 8);
            if (!entries || q != current) {
                current = q;
                entries = &out.queues.emplace_back(current, std::vector<queue_entry>{}).second;
            }
            const rocksdb::Slice v = it->value();
            entries->push_back(entry_of(seq_of_key({k.data(), k.size()}), {v.data(), v.size()}));
        }
        if (!it->status().ok()) throw std::runtime_error("rocksdb iterate: " + it->status().ToString());
    }
    out.seconds = since(t0);
    return out;
}

// ------------------------------------------------------------------- LMDB

#ifdef STORE_BENCH_LMDB
void mdb_check(int rc, const char* what) {
    if (rc != MDB_SUCCESS) throw std::runtime_error(std::string("lmdb ") + what + ": " + mdb_strerror(rc));
}

// Default flags: every commit synced (no MDB_NOSYNC / MDB_NOMETASYNC).
std::pair<MDB_env*, MDB_dbi> lmdb_open(const std::string& dir) {
    MDB_env* env = nullptr;
    mdb_check(mdb_env_create(&env), "env");
    mdb_check(mdb_env_set_mapsize(env, size_t(8) << 30), "mapsize");
    mdb_check(mdb_env_open(env, dir.c_str(), 0, 0644), "open");
    MDB_txn* txn = nullptr;
    mdb_check(mdb_txn_begin(env, nullptr, 0, &txn), "begin");
    MDB_dbi dbi;
    mdb_check(mdb_dbi_open(txn, nullptr, 0, &dbi), "dbi");
    mdb_check(mdb_txn_commit(txn), "commit");
    return {env, dbi};
}

class lmdb_engine final : public engine {
  public:
    lmdb_engine(const std::string& dir, size_t body_size) : body_(body_size, '\0') {
        std::tie(env_, dbi_) = lmdb_open(dir);
    }
    ~lmdb_engine() override { mdb_env_close(env_); }

    void batch(uint64_t enq_first, uint32_t enq_n, uint64_t rm_first, uint32_t rm_n) override {
        MDB_txn* txn = nullptr;
        mdb_check(mdb_txn_begin(env_, nullptr, 0, &txn), "begin");
        for (uint64_t s = enq_first; s < enq_first + enq_n; ++s) {
            make_body(s, body_.data(), body_.size());
            std::string k = key_of(s);
            MDB_val key{k.size(), k.data()};
            MDB_val val{body_.size(), body_.data()};
            mdb_check(mdb_put(txn, dbi_, &key, &val, 0), "put");
        }
        for (uint64_t s = rm_first; s < rm_first + rm_n; ++s) {
            std::string k = key_of(s);
            MDB_val key{k.size(), k.data()};
            mdb_check(mdb_del(txn, dbi_, &key, nullptr), "del");
        }
        mdb_check(mdb_txn_commit(txn), "commit");
        ++syncs_;
    }
    uint64_t syncs() const override { return syncs_; }

  private:
    std::string body_;
    MDB_env* env_ = nullptr;
    MDB_dbi dbi_ = 0;
    uint64_t syncs_ = 0;
};

recovered recover_lmdb(const std::string& dir) {
    recovered out;
    const auto t0 = clock_type::now();
    auto [env, dbi] = lmdb_open(dir);
    MDB_txn* txn = nullptr;
    mdb_check(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "begin");
    MDB_cursor* cur = nullptr;
    mdb_check(mdb_cursor_open(txn, dbi, &cur), "cursor");
    MDB_val k, v;
    std::string current;
    std::vector<queue_entry>* entries = nullptr;
    int rc;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == MDB_SUCCESS; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        std::string_view key(static_cast<const char*>(k.mv_data), k.mv_size);
        std::string_view q = key.substr(0, key.size() - 8);
        if (!entries || q != current) {
            current = q;
            entries = &out.queues.emplace_back(current, std::vector<queue_entry>{}).second;
        }
        entries->push_back(entry_of(seq_of_key(key), {static_cast<const char*>(v.mv_data), v.mv_size}));
    }
    if (rc != MDB_NOTFOUND) mdb_check(rc, "iterate");
    out.seconds = since(t0);
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return out;
}
#endif

} // namespace

void make_body(uint64_t seq, char* out, size_t size) {
    uint64_t x = seq * 0x9E3779B97F4A7C15ull + 1;
    size_t i = 0;
    for (; i < 8 && i < size; ++i) out[i] = static_cast<char>((seq >> (i * 8)) & 0xff);
    while (i < size) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (int b = 0; b < 8 && i < size; ++b, ++i) out[i] = static_cast<char>((x >> (b * 8)) & 0xff);
    }
}

std::vector<std::string> engine_names() {
    std::vector<std::string> v{"journal", "journal-pipelined", "sqlite", "sqlite-rowid", "rocksdb"};
#ifdef STORE_BENCH_LMDB
    v.push_back("lmdb");
#endif
    return v;
}

bool pipelined_variant(const std::string& name) { return name == "journal-pipelined"; }

std::unique_ptr<engine> open_engine(const std::string& name, const std::string& dir, size_t body_size) {
    if (name == "journal") return std::make_unique<journal_engine>(dir, body_size, false);
    if (name == "journal-pipelined") return std::make_unique<journal_engine>(dir, body_size, true);
    if (name == "sqlite") return std::make_unique<sqlite_engine>(dir, body_size, false);
    if (name == "sqlite-rowid") return std::make_unique<sqlite_engine>(dir, body_size, true);
    if (name == "rocksdb") return std::make_unique<rocks_engine>(dir, body_size);
#ifdef STORE_BENCH_LMDB
    if (name == "lmdb") return std::make_unique<lmdb_engine>(dir, body_size);
#endif
    throw std::runtime_error("unknown engine " + name);
}

recovered recover(const std::string& name, const std::string& dir) {
    if (name == "journal" || name == "journal-pipelined") return recover_journal(dir);
    if (name == "sqlite" || name == "sqlite-rowid") return recover_sqlite(dir);
    if (name == "rocksdb") return recover_rocks(dir);
#ifdef STORE_BENCH_LMDB
    if (name == "lmdb") return recover_lmdb(dir);
#endif
    throw std::runtime_error("unknown engine " + name);
}

} // namespace store_bench
