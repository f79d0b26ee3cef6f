#pragma once
// sqlite_metadata_store: the metadata_store kept in one SQLite file that the
// wharfd processes of one host share (`--metadata sqlite:PATH`). Each process
// opens its own connection; the file runs in WAL mode, and every write is one
// BEGIN IMMEDIATE transaction, so a compare-and-set is atomic across
// processes. A write that waits longer than the busy timeout for another
// process fails with store_errc::unavailable.
//
// Leases expire by wall-clock milliseconds (CLOCK_REALTIME, which every
// process on the host shares). Expired leases are swept lazily at the start
// of each operation: their keys are deleted, each deletion an erase change
// with its own revision. The changes log keeps at least the last
// keep_revisions revisions and everything younger than keep_for;
// changes_since() from an older revision fails with store_errc::invalid
// (the caller must list() again).
//
// Details beyond metadata_store's contract:
//  - compare_and_delete of an absent key with expected == 0 returns false;
//    with any other expected it is a conflict.
//  - revoke_lease of an unknown or expired lease returns false.
//  - compare_and_set with lease == 0 on a key held by a lease detaches it.
//  - Keys may not be empty or contain '\0'; values are arbitrary bytes.
//
// Owned by whoever opened it (WLM); one thread at a time, blocking.

#include "wlm/metadata/metadata_store.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace wharf::wlm {

struct sqlite_store_options {
    // Wall-clock milliseconds since the Unix epoch; empty = the system clock
    // (CLOCK_REALTIME). Tests inject their own.
    std::function<int64_t()> now_ms;
    // How long an operation waits for another connection's transaction.
    std::chrono::milliseconds busy_timeout{5000};
    // The changes log keeps at least the last keep_revisions revisions and
    // every change younger than keep_for; older ones are pruned.
    uint64_t keep_revisions = 10000;
    std::chrono::milliseconds keep_for{std::chrono::minutes(10)};
    // Pruning runs when the revision crosses a multiple of this (>= 1).
    uint64_t prune_every = 128;
};

class sqlite_metadata_store final : public metadata_store {
  public:
    // Opens the store at `path`, creating the file and its schema if missing.
    // Refuses a file with another schema version, or one that is not a
    // wharf metadata store.
    static result<std::unique_ptr<sqlite_metadata_store>, store_error> open(const std::string& path);
    static result<std::unique_ptr<sqlite_metadata_store>, store_error> open(const std::string& path,
                                                                          std::function<int64_t()> now_ms);
    static result<std::unique_ptr<sqlite_metadata_store>, store_error> open(const std::string& path,
                                                                          sqlite_store_options options);

    // The schema version this code reads and writes.
    static constexpr int64_t schema_version = 1;

    ~sqlite_metadata_store() override;
    sqlite_metadata_store(const sqlite_metadata_store&) = delete;
    sqlite_metadata_store& operator=(const sqlite_metadata_store&) = delete;

    result<std::optional<key_value>, store_error> get(std::string_view key) override;
    result<std::vector<key_value>, store_error> list(std::string_view prefix) override;
    result<uint64_t, store_error> compare_and_set(std::string_view key, uint64_t expected, std::string_view value,
                                                  lease_id lease = 0) override;
    result<std::vector<std::optional<uint64_t>>, store_error> create_many(const std::vector<new_key>& kvs) override;
    result<bool, store_error> compare_and_delete(std::string_view key, uint64_t expected) override;

    result<lease_id, store_error> grant_lease(std::chrono::milliseconds ttl) override;
    result<bool, store_error> keep_alive(lease_id id) override;
    result<bool, store_error> revoke_lease(lease_id id) override;
    result<int64_t, store_error> lease_expiry(lease_id id) override;

    result<uint64_t, store_error> revision() override;
    result<std::vector<change>, store_error> changes_since(std::string_view prefix, uint64_t after) override;

  private:
    struct impl;
    explicit sqlite_metadata_store(std::unique_ptr<impl> impl);
    std::unique_ptr<impl> impl_;
};

} // namespace wharf::wlm
