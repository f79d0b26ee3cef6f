#pragma once
// metadata_store: the cluster's shared key-value state (membership, ownership,
// rules), with the three things WLM needs from it: compare-and-set on keys,
// leases (keys that vanish when their owner stops renewing), and change
// notification. Backends: sqlite (one file shared by the nodes of one host)
// and etcd v3 (nodes on many hosts); open_metadata_store picks one.
//
// Threads: every method is blocking and may be called from any one thread at
// a time per object (WLM gives the store a thread of its own). Not for the
// message path.

#include "broker/common/result.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wharf::wlm {

enum class store_errc {
    conflict,      // compare-and-set lost: the key's version was not the expected one
    lease_expired, // the lease is gone (expired or revoked)
    unavailable,   // the backend cannot be reached or is locked for too long
    invalid,       // bad argument (empty key, bad ttl)
    io,            // the backend failed
};

struct store_error {
    store_errc code;
    std::string description;
};

using lease_id = int64_t; // 0 = no lease

struct key_value {
    std::string key;
    std::string value;
    uint64_t version = 0;       // the store-wide revision at which this key was last written
    lease_id lease = 0;
};

struct change {
    enum kind_t { put, erase } kind;
    key_value kv;               // for erase: key and the revision of the deletion
};

class metadata_store {
  public:
    virtual ~metadata_store() = default;

    virtual result<std::optional<key_value>, store_error> get(std::string_view key) = 0;
    // Every live key starting with `prefix`, in key order.
    virtual result<std::vector<key_value>, store_error> list(std::string_view prefix) = 0;
    // Writes `value` if the key's current version is `expected` (0: the key
    // must not exist). Returns the new version; store_errc::conflict if
    // another writer got there first. `lease` != 0 ties the key to a lease.
    virtual result<uint64_t, store_error> compare_and_set(std::string_view key, uint64_t expected,
                                                          std::string_view value, lease_id lease = 0) = 0;
    // Creates each key of `kvs` (key, value) that does not exist yet, with no
    // lease. Per key, in order: its new version, or nullopt if it already
    // existed (it is left as it was). The default is one compare_and_set
    // each; a backend that can writes them all at once (SQLite: one
    // transaction, one sync). On an error some may have been written: read
    // them to know.
    using new_key = std::pair<std::string, std::string>;
    virtual result<std::vector<std::optional<uint64_t>>, store_error> create_many(const std::vector<new_key>& kvs) {
        std::vector<std::optional<uint64_t>> out;
        out.reserve(kvs.size());
        for (const auto& [key, value] : kvs) {
            auto put = compare_and_set(key, 0, value);
            if (put) out.emplace_back(*put);
            else if (put.error().code == store_errc::conflict) out.emplace_back(std::nullopt);
            else return fail(put.error());
        }
        return out;
    }
    // Deletes the key if its version is `expected`; conflict otherwise.
    virtual result<bool, store_error> compare_and_delete(std::string_view key, uint64_t expected) = 0;

    virtual result<lease_id, store_error> grant_lease(std::chrono::milliseconds ttl) = 0;
    // Renews the lease for another ttl; lease_expired if it already lapsed
    // (its keys are then gone).
    virtual result<bool, store_error> keep_alive(lease_id id) = 0;
    virtual result<bool, store_error> revoke_lease(lease_id id) = 0;
    // When the lease lapses unless renewed: wall-clock milliseconds since
    // the Unix epoch, by the backend's clock (the one that expires it);
    // lease_expired if it already lapsed or was revoked. For operators
    // (management shows each node's), not for deciding anything: the
    // answer is stale as soon as the owner renews.
    virtual result<int64_t, store_error> lease_expiry(lease_id id) = 0;

    // The store-wide revision now (every write increments it).
    virtual result<uint64_t, store_error> revision() = 0;
    // Changes to keys under `prefix` with revision > `after`, oldest first.
    // Expired leases' keys show up as erase changes. A change may show up
    // shortly after its write (etcd delivers them through a watch): poll.
    // store_errc::invalid: the history after `after` is gone; list() again.
    virtual result<std::vector<change>, store_error> changes_since(std::string_view prefix,
                                                                   uint64_t after) = 0;
};

} // namespace wharf::wlm
