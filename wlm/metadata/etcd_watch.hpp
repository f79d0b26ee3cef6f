#pragma once
// etcd_watch: one etcd v3 watch on a key range, from a start revision on,
// kept open by a thread of its own that buffers the events it receives
// (etcd_metadata_store::changes_since takes them). When the connection
// fails it reconnects (the next endpoint; at most one attempt per
// retry_every) and resumes from the revision after the last event it got,
// so nothing is lost or repeated. When etcd has compacted the revision it
// needs, the watch stops and says so: the reader must list everything again.
//
// A member that stops answering without closing the connection (stopped,
// or cut off from the others' quorum) would leave the stream open and
// silent forever, which looks just like a quiet cluster. So a second thread
// asks the watched member a linearizable read every probe_every; when that
// fails, the stream is dropped and the watch moves to the next endpoint.
//
// Owned by the store; take() and the other methods from the store's thread,
// the buffer behind a mutex shared with the watch thread. The destructor
// cancels the stream and joins the thread.

#include "wlm/metadata/etcd_http.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wharf::wlm::detail {

struct etcd_watch_options {
    std::vector<etcd_endpoint> endpoints;
    std::string key, range_end;   // raw bytes, as in a range request
    uint64_t start_revision = 1;
    std::chrono::milliseconds connect_timeout{500};
    std::chrono::milliseconds retry_every{200};
    std::chrono::milliseconds probe_every{1000}; // and the probe's own timeout
};

class etcd_watch {
  public:
    struct event {
        bool erase = false;
        std::string key, value;  // the full key, as etcd has it
        uint64_t revision = 0;   // mod_revision (of the deletion, for an erase)
        int64_t lease = 0;
    };
    struct taken {
        std::vector<event> events;   // revision > after, oldest first
        uint64_t compacted = 0;      // != 0: etcd compacted past what the watch needs; it has stopped
        bool connected = false;      // the stream is open now
        std::string last_error;      // why the last connection failed
    };

    explicit etcd_watch(etcd_watch_options options);
    ~etcd_watch();
    etcd_watch(const etcd_watch&) = delete;
    etcd_watch& operator=(const etcd_watch&) = delete;

    // Waits until etcd confirmed the watch, or it failed on every endpoint,
    // or `timeout` passed.
    void wait_started(std::chrono::milliseconds timeout);
    // The buffered events after `after`; forgets those up to `after`.
    taken take(uint64_t after);
    // The first revision this watch still holds events from.
    uint64_t covers_from() const;

  private:
    void run();
    void probe();
    bool on_message(std::string_view text, size_t endpoint);

    const etcd_watch_options options_;
    etcd_http_stream stream_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<event> events_;
    uint64_t from_;          // events before this revision were taken (or never watched)
    uint64_t next_;          // where a reconnect resumes
    uint64_t compacted_ = 0;
    bool connected_ = false;
    size_t endpoint_ = 0;    // the one the stream is on
    size_t failures_ = 0;    // connections failed since the last success
    std::string last_error_;
    bool stop_ = false;
    std::thread thread_;
    std::thread prober_;
};

} // namespace wharf::wlm::detail
