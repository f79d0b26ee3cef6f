#pragma once
// etcd_metadata_store: the metadata_store kept in an etcd v3 cluster, for
// wharfd nodes on many hosts (`--metadata etcd://HOST:PORT[,HOST:PORT...]
// [/PREFIX]`). It speaks to etcd's JSON gateway over HTTP/1.1
// (etcd_http.hpp). Every key lives under the prefix (default "/wharf/"), so
// several clusters can share one etcd; the prefix never shows in the keys
// this interface takes or returns.
//
// Mapping onto etcd:
//  - a key's version is its etcd mod_revision; revision() is etcd's
//    cluster-wide revision (other clusters' writes advance it too);
//  - compare_and_set is one txn: compare mod_revision == expected (0:
//    create_revision == 0, the key is absent), then put (with the lease);
//  - leases are etcd leases: ttl rounds up to whole seconds and etcd may
//    raise it to its minimum; lease_expiry is now + etcd's remaining TTL,
//    to the second;
//  - changes_since is fed by an etcd watch per prefix, opened from after + 1
//    on the first call and kept open by a background thread (etcd_watch);
//    a write shows up there once the watch delivers it, usually within
//    milliseconds, so callers poll. When etcd compacted the revisions asked
//    for, changes_since fails with store_errc::invalid (list() again).
//
// Errors: no endpoint reachable within request_timeout (all endpoints
// together) is store_errc::unavailable; so is an etcd without a leader.
//
// Details beyond metadata_store's contract are those of
// sqlite_metadata_store (compare_and_delete of an absent key with expected
// 0 is false, revoke of an unknown lease is false, a put without a lease
// detaches the key from its lease, keys are non-empty without NUL bytes).
//
// Owned by whoever opened it (WLM); one thread at a time, blocking.

#include "wlm/metadata/metadata_store.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace wharf::wlm {

struct etcd_store_options {
    std::vector<std::string> endpoints; // "HOST:PORT"
    std::string prefix = "/wharf/";
    // One call, every endpoint tried included, ends within this.
    std::chrono::milliseconds request_timeout{1500};
    // One TCP connect to one endpoint.
    std::chrono::milliseconds connect_timeout{500};
};

class etcd_metadata_store final : public metadata_store {
  public:
    // `spec` is "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]". Connects lazily:
    // a bad spec fails here, an unreachable etcd on the first call.
    static result<std::unique_ptr<etcd_metadata_store>, store_error> open(const std::string& spec);
    static result<std::unique_ptr<etcd_metadata_store>, store_error> open(etcd_store_options options);
    // The options a spec stands for; the error says what is wrong with it.
    static result<etcd_store_options, std::string> parse_spec(const std::string& spec);

    ~etcd_metadata_store() override;
    etcd_metadata_store(const etcd_metadata_store&) = delete;
    etcd_metadata_store& operator=(const etcd_metadata_store&) = delete;

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
    explicit etcd_metadata_store(std::unique_ptr<impl> impl);
    std::unique_ptr<impl> impl_;
};

} // namespace wharf::wlm
