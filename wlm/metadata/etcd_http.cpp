#include "wlm/metadata/etcd_http.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <mutex>
#include <optional>

namespace wharf::wlm::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using clock = std::chrono::steady_clock;

namespace {

// Runs the asynchronous operation `start` begins on `ioc` until it completes
// (the tcp_stream's expiry bounds it).
template <class Start> beast::error_code run_op(asio::io_context& ioc, Start&& start) {
    beast::error_code result = asio::error::operation_aborted;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
}

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// etcd answers "no leader" (gRPC Unavailable, code 14) from a member cut off
// from the others: another member may do better.
bool no_leader(const http_reply& r) {
    return r.status == 503 || r.body.find("\"code\":14") != std::string::npos;
}

http::request<http::string_body> make_request(const etcd_endpoint& ep, std::string_view target,
                                              const std::string& body) {
    http::request<http::string_body> req{http::verb::post, std::string(target), 11};
    req.set(http::field::host, ep.text());
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    return req;
}

} // namespace

result<std::vector<etcd_endpoint>, std::string> parse_endpoints(std::string_view text) {
    std::vector<etcd_endpoint> out;
    while (!text.empty()) {
        const auto comma = text.find(',');
        std::string_view one = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        const auto colon = one.rfind(':');
        if (colon == std::string_view::npos || colon == 0)
            return fail("'" + std::string(one) + "' is not HOST:PORT");
        unsigned port = 0;
        std::string_view digits = one.substr(colon + 1);
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535)
            return fail("'" + std::string(one) + "': the port is not a number in 1..65535");
        std::string host(one.substr(0, colon));
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        out.push_back({std::move(host), static_cast<uint16_t>(port)});
    }
    if (out.empty()) return fail(std::string("no HOST:PORT given"));
    return out;
}

// ---- etcd_http_client ------------------------------------------------------------

struct etcd_http_client::impl {
    std::vector<etcd_endpoint> endpoints;
    std::chrono::milliseconds request_timeout, connect_timeout;
    asio::io_context ioc;
    std::optional<beast::tcp_stream> stream; // open to endpoints[current], or none
    beast::flat_buffer buffer;
    size_t current = 0;

    std::string connect(const etcd_endpoint& ep, clock::time_point deadline) {
        stream.reset();
        tcp::resolver resolver(ioc);
        beast::error_code ec;
        auto addresses = resolver.resolve(ep.host, std::to_string(ep.port), ec);
        if (ec) return "cannot resolve " + ep.host + ": " + ec.message();
        stream.emplace(ioc);
        stream->expires_at(deadline);
        ec = run_op(ioc, [&](auto h) { stream->async_connect(addresses, std::move(h)); });
        if (ec) {
            stream.reset();
            return "connect: " + ec.message();
        }
        buffer.clear();
        return {};
    }

    std::string exchange(const etcd_endpoint& ep, std::string_view target, const std::string& body,
                         clock::time_point deadline, http_reply& out) {
        auto req = make_request(ep, target, body);
        stream->expires_at(deadline);
        auto ec = run_op(ioc, [&](auto h) { http::async_write(*stream, req, std::move(h)); });
        if (ec) return "write: " + ec.message();
        http::response_parser<http::string_body> parser;
        parser.body_limit(64u << 20);
        ec = run_op(ioc, [&](auto h) { http::async_read(*stream, buffer, parser, std::move(h)); });
        if (ec) return "read: " + ec.message();
        auto res = parser.release();
        out.status = res.result_int();
        out.body = std::move(res.body());
        if (!res.keep_alive()) stream.reset();
        return {};
    }
};

etcd_http_client::etcd_http_client(std::vector<etcd_endpoint> endpoints, std::chrono::milliseconds request_timeout,
                                   std::chrono::milliseconds connect_timeout)
    : impl_(std::make_unique<impl>()) {
    impl_->endpoints = std::move(endpoints);
    impl_->request_timeout = request_timeout;
    impl_->connect_timeout = connect_timeout;
}

etcd_http_client::~etcd_http_client() = default;

result<http_reply, std::string> etcd_http_client::post(std::string_view target, const std::string& body) {
    auto& s = *impl_;
    const auto deadline = clock::now() + s.request_timeout;
    std::string errors;
    // Each endpoint gets its share of the time, so a hung member leaves
    // time for the others.
    const auto share = std::max(s.connect_timeout, s.request_timeout / static_cast<int>(s.endpoints.size()));
    for (size_t tried = 0; tried < s.endpoints.size() && clock::now() < deadline; ++tried) {
        const etcd_endpoint& ep = s.endpoints[s.current];
        const auto until = std::min(deadline, clock::now() + share);
        const bool reused = s.stream.has_value();
        http_reply reply;
        std::string err = reused ? std::string() : s.connect(ep, std::min(until, clock::now() + s.connect_timeout));
        if (err.empty()) err = s.exchange(ep, target, body, until, reply);
        if (!err.empty() && reused && clock::now() < until) {
            // The member may have closed an idle keep-alive connection: once
            // more on a fresh one before trying another member.
            err = s.connect(ep, std::min(until, clock::now() + s.connect_timeout));
            if (err.empty()) err = s.exchange(ep, target, body, until, reply);
        }
        if (err.empty() && no_leader(reply)) err = "no leader (" + reply.body.substr(0, 200) + ")";
        if (err.empty() && reply.status != 200 && reply.body.rfind('{', 0) != 0)
            err = "HTTP " + std::to_string(reply.status) + " without an etcd answer (is this etcd's client port?)";
        if (err.empty()) return reply;
        s.stream.reset();
        errors += (errors.empty() ? "" : "; ") + ep.text() + ": " + err;
        s.current = (s.current + 1) % s.endpoints.size();
    }
    return fail("no etcd endpoint answered " + std::string(target) + " within " + ms_text(s.request_timeout) +
                " (" + (errors.empty() ? std::string("out of time") : errors) + ")");
}

// ---- etcd_http_stream ------------------------------------------------------------

struct etcd_http_stream::impl {
    std::mutex mu;
    asio::io_context* ioc = nullptr; // the run() in progress
    bool cancelled = false;
    // interrupt() of the run() in progress. A flag as well as io.stop():
    // between two steps the io_context is not running, and the next step's
    // restart() would forget the stop.
    bool interrupted = false;

    // run_op, except that cancel() ends it: false then.
    template <class Start> bool step(asio::io_context& io, beast::error_code& ec, Start&& start) {
        bool done = false;
        start([&](beast::error_code e, auto&&...) {
            ec = e;
            done = true;
        });
        {
            std::lock_guard l(mu);
            if (cancelled || interrupted) return false;
            io.restart();
        }
        io.run();
        return done;
    }
};

etcd_http_stream::etcd_http_stream() : impl_(std::make_unique<impl>()) {}
etcd_http_stream::~etcd_http_stream() = default;

void etcd_http_stream::cancel() {
    std::lock_guard l(impl_->mu);
    impl_->cancelled = true;
    if (impl_->ioc) impl_->ioc->stop();
}

void etcd_http_stream::interrupt() {
    std::lock_guard l(impl_->mu);
    if (!impl_->ioc) return; // between runs: the next one is on another member
    impl_->interrupted = true;
    impl_->ioc->stop();
}

std::string etcd_http_stream::run(const etcd_endpoint& ep, std::string_view target, const std::string& body,
                                  std::chrono::milliseconds connect_timeout,
                                  const std::function<bool(std::string_view)>& on_message) {
    asio::io_context io;
    {
        std::lock_guard l(impl_->mu);
        if (impl_->cancelled) return {};
        impl_->ioc = &io;
        impl_->interrupted = false;
    }
    struct unset {
        impl& s;
        ~unset() {
            std::lock_guard l(s.mu);
            s.ioc = nullptr;
        }
    } unset_ioc{*impl_};

    beast::error_code ec;
    tcp::resolver resolver(io);
    auto addresses = resolver.resolve(ep.host, std::to_string(ep.port), ec);
    if (ec) return "cannot resolve " + ep.host + ": " + ec.message();
    beast::tcp_stream stream(io);
    stream.expires_after(connect_timeout);
    if (!impl_->step(io, ec, [&](auto h) { stream.async_connect(addresses, std::move(h)); })) return {};
    if (ec) return "connect: " + ec.message();
    auto req = make_request(ep, target, body);
    if (!impl_->step(io, ec, [&](auto h) { http::async_write(stream, req, std::move(h)); })) return {};
    if (ec) return "write: " + ec.message();

    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.body_limit(boost::none); // a watch reply never ends by itself
    if (!impl_->step(io, ec, [&](auto h) { http::async_read_header(stream, buffer, parser, std::move(h)); }))
        return {};
    if (ec) return "read: " + ec.message();
    if (parser.get().result_int() != 200) return "HTTP status " + std::to_string(parser.get().result_int());
    stream.expires_never(); // a quiet watch is normal; the store's heartbeat notices a dead member

    std::string pending;
    bool stopped = false;
    auto on_chunk = [&](std::uint64_t, beast::string_view data, beast::error_code& e) -> std::size_t {
        pending.append(data.data(), data.size());
        size_t nl;
        while (!stopped && (nl = pending.find('\n')) != std::string::npos) {
            if (nl > 0 && !on_message(std::string_view(pending.data(), nl))) stopped = true;
            pending.erase(0, nl + 1);
        }
        if (stopped) e = asio::error::operation_aborted;
        return data.size();
    };
    parser.on_chunk_body(on_chunk); // kept by reference: lives until run() returns
    while (!parser.is_done()) {
        if (!impl_->step(io, ec, [&](auto h) { http::async_read_some(stream, buffer, parser, std::move(h)); }))
            return {};
        if (stopped) return {};
        if (ec) return "read: " + ec.message();
    }
    return "the member ended the stream";
}

} // namespace wharf::wlm::detail
