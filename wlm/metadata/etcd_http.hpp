#pragma once
// etcd_http: the HTTP/1.1 side of etcd_metadata_store — JSON POSTs to etcd
// v3's gateway (/v3/kv/range, /v3/kv/txn, /v3/lease/...) and the streaming
// /v3/watch. Boost.Beast does the HTTP; nothing outside this folder sees it
// (the .cpp includes Beast, the header does not).
//
// etcd_http_client: one keep-alive connection to one of the endpoints at a
// time. A request fails over to the next endpoint on a connect or I/O error
// or when the member answers that it has no leader, and every request ends
// within its timeout (all endpoints together), so a dead member never holds
// the caller longer than that. A request may reach etcd twice when a reply
// is lost: callers only send requests for which that is harmless
// (compare-and-set transactions, lease renewals, reads).
//
// etcd_http_stream: one streaming POST (a watch) that hands each JSON message
// of the reply to a callback as it arrives; cancel() from any thread ends it.
//
// One thread at a time per object (cancel() excepted).

#include "broker/common/result.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::wlm::detail {

struct etcd_endpoint {
    std::string host;
    uint16_t port = 0;
    std::string text() const { return host + ":" + std::to_string(port); }
};

// "HOST:PORT[,HOST:PORT...]" -> endpoints; the error says what is wrong.
result<std::vector<etcd_endpoint>, std::string> parse_endpoints(std::string_view text);

struct http_reply {
    unsigned status = 0;
    std::string body;
};

class etcd_http_client {
  public:
    etcd_http_client(std::vector<etcd_endpoint> endpoints, std::chrono::milliseconds request_timeout,
                     std::chrono::milliseconds connect_timeout);
    ~etcd_http_client();
    etcd_http_client(const etcd_http_client&) = delete;
    etcd_http_client& operator=(const etcd_http_client&) = delete;

    // POSTs `body` (JSON) to `target` and returns the reply, whatever its
    // status; fails (with each endpoint's error) when no endpoint answered
    // within the request timeout.
    result<http_reply, std::string> post(std::string_view target, const std::string& body);

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

class etcd_http_stream {
  public:
    etcd_http_stream();
    ~etcd_http_stream();
    etcd_http_stream(const etcd_http_stream&) = delete;
    etcd_http_stream& operator=(const etcd_http_stream&) = delete;

    // Connects to `ep` (within connect_timeout), POSTs `body` to `target`,
    // and calls on_message with each newline-delimited message of the reply
    // until the reply ends, the connection fails, on_message returns false,
    // or cancel() is called. Returns why it ended ("" when on_message
    // stopped it or cancel() did).
    std::string run(const etcd_endpoint& ep, std::string_view target, const std::string& body,
                    std::chrono::milliseconds connect_timeout,
                    const std::function<bool(std::string_view)>& on_message);
    // Ends a run() in progress (or the next one) from any thread, and every
    // run() after it.
    void cancel();
    // Ends the run() in progress, if any, from any thread; later runs go on.
    void interrupt();

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace wharf::wlm::detail
