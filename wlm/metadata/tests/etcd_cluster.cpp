#include "wlm/metadata/tests/etcd_cluster.hpp"

#include "wlm/metadata/etcd_http.hpp"

#include "broker/common/testing/free_port.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace wharf::wlm::test {

namespace {

using clock = std::chrono::steady_clock;

using wharf::test_support::free_port;

std::string url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

} // namespace

etcd_cluster::etcd_cluster(size_t members) {
    const char* bin = std::getenv("WHARF_ETCD");
    binary_ = bin && *bin ? bin : "/usr/bin/etcd";
    if (access(binary_.c_str(), X_OK) != 0) {
        start_error_ = binary_ + " is not there: install etcd-server (scripts/deps.sh test)";
        return;
    }
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/wharf-etcd-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
        start_error_ = std::string("mkdtemp: ") + std::strerror(errno);
        return;
    }
    dir_ = tmpl;
    for (size_t i = 0; i < members; ++i)
        members_.push_back({"m" + std::to_string(i + 1), free_port(), free_port(), -1});
    for (size_t i = 0; i < members; ++i) spawn(i);
    if (!wait_healthy(std::chrono::seconds(20))) start_error_ = "the etcd cluster in " + dir_ + " did not answer";
}

etcd_cluster::~etcd_cluster() {
    for (size_t i = 0; i < members_.size(); ++i)
        if (members_[i].pid > 0) ::kill(members_[i].pid, SIGTERM);
    for (size_t i = 0; i < members_.size(); ++i) reap(i);
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
}

std::string etcd_cluster::endpoints() const {
    std::string out;
    for (const auto& m : members_) out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(m.client_port);
    return out;
}

void etcd_cluster::spawn(size_t i) {
    member& m = members_[i];
    std::string initial;
    for (const auto& o : members_) initial += (initial.empty() ? "" : ",") + o.name + "=" + url(o.peer_port);
    std::vector<std::string> args{binary_,
                                  "--name", m.name,
                                  "--data-dir", dir_ + "/" + m.name,
                                  "--listen-client-urls", url(m.client_port),
                                  "--advertise-client-urls", url(m.client_port),
                                  "--listen-peer-urls", url(m.peer_port),
                                  "--initial-advertise-peer-urls", url(m.peer_port),
                                  "--initial-cluster", initial,
                                  "--initial-cluster-state", "new",
                                  "--initial-cluster-token", "wharf-test",
                                  "--heartbeat-interval", "50",
                                  "--election-timeout", "500",
                                  "--logger", "zap",
                                  "--log-outputs", dir_ + "/" + m.name + ".log"};
    // A restart reuses the data dir; etcd ignores the initial-cluster flags then.
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string out = dir_ + "/" + m.name + ".out";
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    if (posix_spawn(&pid, binary_.c_str(), &fa, nullptr, argv.data(), environ) == 0) m.pid = pid;
    posix_spawn_file_actions_destroy(&fa);
}

// Waits (bounded) for member i to exit; SIGKILL if it does not.
void etcd_cluster::reap(size_t i) {
    member& m = members_[i];
    if (m.pid <= 0) return;
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, m.pid, 0));
    if (pidfd >= 0) {
        pollfd p{pidfd, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0) ::kill(m.pid, SIGKILL);
        close(pidfd);
    }
    waitpid(m.pid, nullptr, 0);
    m.pid = -1;
}

void etcd_cluster::kill(size_t i) {
    if (members_[i].pid <= 0) return;
    ::kill(members_[i].pid, SIGKILL);
    reap(i);
}

void etcd_cluster::freeze(size_t i) {
    if (members_[i].pid > 0) ::kill(members_[i].pid, SIGSTOP);
}

void etcd_cluster::thaw(size_t i) {
    if (members_[i].pid > 0) ::kill(members_[i].pid, SIGCONT);
}

void etcd_cluster::start(size_t i) {
    if (members_[i].pid <= 0) spawn(i);
}

bool etcd_cluster::wait_healthy(std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    while (clock::now() < deadline) {
        bool all = true;
        for (const auto& m : members_) {
            if (m.pid <= 0) continue;
            // A serializable read answers without a leader; a linearizable
            // one (the default) needs one: that is the check.
            detail::etcd_http_client c({{"127.0.0.1", m.client_port}}, std::chrono::milliseconds(500),
                                       std::chrono::milliseconds(200));
            auto r = c.post("/v3/kv/range", R"({"key":"AA=="})");
            if (!r || r->status != 200 || r->body.find("\"revision\"") == std::string::npos) all = false;
        }
        if (all) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50)); // poll interval, under the deadline
    }
    return false;
}

} // namespace wharf::wlm::test
