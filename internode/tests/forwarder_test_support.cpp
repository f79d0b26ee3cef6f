#include "internode/tests/forwarder_test_support.hpp"

#include <proton/annotation_key.hpp>
#include <proton/binary.hpp>
#include <proton/codec/vector.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace wharf::internode {
std::ostream& operator<<(std::ostream& o, forward_result r) { return o << to_string(r); }
std::ostream& operator<<(std::ostream& o, const forward_outcome& out) {
    o << out.result;
    if (!out.description.empty()) o << " (" << out.description << ")";
    return o;
}
} // namespace wharf::internode

namespace wharf::internode::test {

// ---- outcome_log ----------------------------------------------------------

forward_callback outcome_log::callback(size_t index) {
    return [this, index](forward_outcome out) {
        std::lock_guard lock(mu_);
        if (got_.size() <= index) got_.resize(index + 1);
        got_[index].push_back(std::move(out));
        ++calls_;
        if (std::this_thread::get_id() == creator_) ++inline_calls_;
        cv_.notify_all();
    };
}

bool outcome_log::wait_for_calls(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return calls_ >= n; });
}

size_t outcome_log::calls() {
    std::lock_guard lock(mu_);
    return calls_;
}

std::vector<forward_outcome> outcome_log::outcomes(size_t n) {
    std::lock_guard lock(mu_);
    std::vector<forward_outcome> out;
    for (size_t i = 0; i < n; ++i) {
        if (i < got_.size() && !got_[i].empty()) out.push_back(got_[i].front());
        else out.push_back({forward_result::failed, "never reported"});
    }
    return out;
}

::testing::AssertionResult outcome_log::exactly_once(size_t n) {
    std::lock_guard lock(mu_);
    if (inline_calls_ != 0)
        return ::testing::AssertionFailure()
               << inline_calls_ << " done() calls ran on the caller's thread";
    for (size_t i = 0; i < n; ++i) {
        const size_t k = i < got_.size() ? got_[i].size() : 0;
        if (k != 1)
            return ::testing::AssertionFailure() << "message " << i << ": done() called " << k << " times";
    }
    if (calls_ != n)
        return ::testing::AssertionFailure() << calls_ << " done() calls for " << n << " messages";
    return ::testing::AssertionSuccess();
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(1ms); // polling interval, not a wait for a condition
    }
    return true;
}

forwarder_options local_options(uint16_t port) {
    forwarder_options o;
    o.host = "127.0.0.1";
    o.port = port;
    o.container_id = "forwarder-test";
    return o;
}

// ---- messages -------------------------------------------------------------

std::string encoded_message(size_t i, size_t body_bytes) {
    proton::message m;
    m.id(proton::message_id("msg-" + std::to_string(i)));
    m.subject("subject " + std::to_string(i % 7));
    m.content_type(i % 2 ? "application/octet-stream" : "text/plain");
    m.durable(i % 3 == 0);
    m.properties().put("index", static_cast<int64_t>(i));
    m.properties().put("label", std::string(i % 5, 'x'));
    m.message_annotations().put(proton::symbol("x-opt-test"), proton::symbol("a" + std::to_string(i)));
    const size_t size = body_bytes != 0 ? body_bytes : 1 + (i * 37) % 700;
    switch (i % 3) {
    case 0: {
        std::string s(size, ' ');
        for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>('a' + (i + k) % 26);
        m.body(s);
        break;
    }
    case 1: {
        proton::binary b(size);
        for (size_t k = 0; k < size; ++k) b[k] = static_cast<uint8_t>((i + k) & 0xff);
        m.body(b);
        break;
    }
    default: {
        std::vector<int64_t> v;
        for (size_t k = 0; k < size / 8 + 1; ++k) v.push_back(static_cast<int64_t>(i * 1000 + k));
        m.body(v);
        break;
    }
    }
    std::vector<char> buf;
    m.encode(buf);
    return std::string(buf.begin(), buf.end());
}

std::string with_footer(std::string bytes, size_t i) {
    // footer (descriptor 0x78) = map8 { symbol "x-footer" : string "<i>" }
    const std::string key = "x-footer";
    const std::string value = "f" + std::to_string(i);
    std::string items;
    items += '\xa3';
    items += static_cast<char>(key.size());
    items += key;
    items += '\xa1';
    items += static_cast<char>(value.size());
    items += value;
    bytes += std::string("\x00\x53\x78\xc1", 4);
    bytes += static_cast<char>(items.size() + 1); // size counts the count byte
    bytes += '\x02';                              // two elements: key, value
    bytes += items;
    return bytes;
}

// ---- sockets --------------------------------------------------------------

namespace {
// Binds a TCP socket to 127.0.0.1 with an OS-chosen port.
int bind_local(uint16_t& port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ADD_FAILURE() << "socket: " << std::strerror(errno);
        return -1;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ADD_FAILURE() << "bind: " << std::strerror(errno);
        close(fd);
        return -1;
    }
    port = ntohs(a.sin_port);
    return fd;
}
} // namespace

silent_listener::silent_listener() {
    fd_ = bind_local(port_);
    if (fd_ >= 0 && listen(fd_, 16) != 0) ADD_FAILURE() << "listen: " << std::strerror(errno);
}

silent_listener::~silent_listener() {
    for (int fd : accepted_) close(fd);
    if (fd_ >= 0) close(fd_);
}

bool silent_listener::accept_one(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return false;
    accepted_.push_back(fd);
    return true;
}

void silent_listener::reset_accepted() {
    for (int fd : accepted_) {
        linger l{1, 0}; // close with RST instead of FIN
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        close(fd);
    }
    accepted_.clear();
}

namespace {
// One AMQP frame: size, doff 2, type (0 AMQP, 1 SASL), channel 0, body.
std::string frame(uint8_t type, const std::string& body) {
    const auto size = static_cast<uint32_t>(8 + body.size());
    std::string f;
    for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((size >> shift) & 0xff);
    f += '\x02';
    f += static_cast<char>(type);
    f += std::string(2, '\0');
    return f + body;
}
} // namespace

bool silent_listener::open_then_hang(std::chrono::milliseconds timeout) {
    if (accepted_.empty()) return false;
    const int fd = accepted_.back();
    using namespace std::string_literals;
    const std::string hello =
        "AMQP\x03\x01\x00\x00"s +
        frame(1, "\x00\x53\x40\xc0\x0c\x01\xa3\x09" "ANONYMOUS"s) +   // sasl-mechanisms
        frame(1, "\x00\x53\x44\xc0\x03\x01\x50\x00"s) +                // sasl-outcome ok
        "AMQP\x00\x01\x00\x00"s +
        // open(container-id "frozen", null, null, null, idle-time-out 100)
        frame(0, "\x00\x53\x10\xc0\x11\x05\xa1\x06" "frozen" "\x40\x40\x40\x70\x00\x00\x00\x64"s);
    if (write(fd, hello.data(), hello.size()) != static_cast<ssize_t>(hello.size())) return false;

    // Read the client's frames until an empty one (a heartbeat) comes.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string in;
    size_t at = 0;
    for (;;) {
        while (in.size() - at >= 8) {
            if (in.compare(at, 4, "AMQP") == 0) { at += 8; continue; } // a protocol header
            const uint32_t size = (static_cast<uint32_t>(static_cast<uint8_t>(in[at])) << 24) |
                                  (static_cast<uint32_t>(static_cast<uint8_t>(in[at + 1])) << 16) |
                                  (static_cast<uint32_t>(static_cast<uint8_t>(in[at + 2])) << 8) |
                                  static_cast<uint32_t>(static_cast<uint8_t>(in[at + 3]));
            if (size == 8) return true;
            if (size < 8 || in.size() - at < size) break;
            at += size;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
        char buf[4096];
        const ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0) return false;
        in.append(buf, static_cast<size_t>(got));
    }
}

refused_port::refused_port() { fd_ = bind_local(port_); }
refused_port::~refused_port() {
    if (fd_ >= 0) close(fd_);
}

} // namespace wharf::internode::test
