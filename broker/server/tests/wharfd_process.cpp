#include "broker/server/tests/wharfd_process.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace wharf::server::test {

namespace {

using clock = std::chrono::steady_clock;

int remaining_ms(clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

std::string make_temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/wharfd-ct-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
        ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
        return {};
    }
    return tmpl;
}

} // namespace

wharfd_process::wharfd_process(wharfd_options opts) : opts_(std::move(opts)) {
    dir_ = make_temp_dir();
    if (dir_.empty()) return;

    std::vector<std::string> args{WHARFD_PATH, "--node-id", opts_.node_id, "--data-dir", dir_ + "/data",
                                  "--log-level", opts_.log_level};
    // A test that names its listener gets only that one, so that a port
    // another process took meanwhile shows as a failed start (no second
    // listener on port 0 says "listening" instead).
    if (std::find(opts_.args.begin(), opts_.args.end(), "--listen") == opts_.args.end()) {
        args.push_back("--listen");
        args.push_back("127.0.0.1:0");
    }
    // Two workers whatever the host's cores (the default on two cores is
    // one), so that the hand-offs between connections on different threads
    // are exercised by every test.
    if (std::find(opts_.args.begin(), opts_.args.end(), "--threads") == opts_.args.end()) {
        args.push_back("--threads");
        args.push_back("2");
    }
    if (!opts_.config_toml.empty()) {
        const std::string path = dir_ + "/wharfd.toml";
        std::ofstream(path) << opts_.config_toml;
        args.push_back("--config");
        args.push_back(path);
    }
    args.insert(args.end(), opts_.args.begin(), opts_.args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe2: " << std::strerror(errno);
        return;
    }
    const std::string err_path = dir_ + "/stderr.txt";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, WHARFD_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) {
        close(out[0]);
        ADD_FAILURE() << "posix_spawn " << WHARFD_PATH << ": " << std::strerror(rc);
        return;
    }
    pid_ = pid;
    stdout_fd_ = out[0];
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd_ < 0) ADD_FAILURE() << "pidfd_open: " << std::strerror(errno);

    // Read the first stdout line, or notice the exit, before the deadline.
    const auto deadline = clock::now() + opts_.start_timeout;
    std::string buf;
    for (;;) {
        pollfd fds[2] = {{stdout_fd_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
        const int n = poll(fds, 2, remaining_ms(deadline));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ADD_FAILURE() << "wharfd printed no 'listening on' line within "
                          << opts_.start_timeout.count() << " ms";
            return;
        }
        if (fds[0].revents != 0) {
            char chunk[256];
            const ssize_t got = read(stdout_fd_, chunk, sizeof chunk);
            if (got > 0) {
                buf.append(chunk, static_cast<size_t>(got));
                const auto nl = buf.find('\n');
                if (nl == std::string::npos) continue;
                ready_line_ = buf.substr(0, nl);
                const auto colon = ready_line_.rfind(':');
                if (ready_line_.find(" listening on ") != std::string::npos &&
                    colon != std::string::npos)
                    port_ = static_cast<uint16_t>(std::atoi(ready_line_.c_str() + colon + 1));
                if (port_ == 0) ADD_FAILURE() << "unexpected first line: " << ready_line_;
                return;
            }
            // EOF: the process is going away; fall through to reap it.
        }
        if (fds[1].revents != 0 || fds[0].revents != 0) {
            reap(std::chrono::milliseconds(remaining_ms(deadline)));
            return;
        }
    }
}

wharfd_process::~wharfd_process() {
    if (running()) {
        const auto code = stop();
        if (opts_.on_stop == exit_check::expect_zero) {
            EXPECT_EQ(code, std::optional<int>(0)) << "wharfd did not exit 0 on SIGTERM";
        }
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
    if (pidfd_ >= 0) close(pidfd_);
    if (::testing::Test::HasFailure() && !dir_.empty()) {
        std::string err = stderr_text();
        if (err.size() > 8000) err = "...\n" + err.substr(err.size() - 8000);
        std::fprintf(stderr, "---- wharfd stderr (%s) ----\n%s---- end ----\n", dir_.c_str(),
                     err.c_str());
    }
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
}

std::string wharfd_process::url() const { return "127.0.0.1:" + std::to_string(port_); }

std::string wharfd_process::stderr_text() const {
    std::ifstream in(dir_ + "/stderr.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool wharfd_process::reap(std::chrono::milliseconds timeout) {
    if (pid_ <= 0 || exited_) return exited_;
    const auto deadline = clock::now() + timeout;
    for (;;) {
        pollfd p{pidfd_, POLLIN, 0};
        const int n = poll(&p, 1, remaining_ms(deadline));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        break;
    }
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_) return false;
    exited_ = true;
    if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        ADD_FAILURE() << "wharfd died of signal " << WTERMSIG(status) << " ("
                      << strsignal(WTERMSIG(status)) << ")";
    return true;
}

std::optional<int> wharfd_process::wait_exit(std::chrono::milliseconds timeout) {
    reap(timeout);
    return exit_code_;
}

std::optional<int> wharfd_process::stop() {
    if (!running()) return exit_code_;
    kill(pid_, SIGTERM);
    if (!reap(opts_.stop_timeout)) {
        ADD_FAILURE() << "wharfd did not exit within " << opts_.stop_timeout.count()
                      << " ms of SIGTERM; killing it";
        kill(pid_, SIGKILL);
        reap(std::chrono::milliseconds(5000));
        return std::nullopt;
    }
    return exit_code_;
}

} // namespace wharf::server::test
