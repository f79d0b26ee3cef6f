#pragma once
// For tests: runs a program (a tool built here: wharf-wlm, wharf-bench, an
// example) as a child process and waits for it with a deadline, polling a
// pidfd (no sleeps). Header-only, like free_port.hpp, so any test target can
// use it without linking anything.

#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace wharf::test_support {

// Runs argv (argv[0] a path) and waits for it, up to `timeout`. The exit
// code, or nullopt (time-out: it is killed; or it died by a signal). Its
// stdout and stderr, interleaved, go to *output.
inline std::optional<int> run_tool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                   std::string* output) {
    char out_path[] = "/tmp/wharf-test-tool-XXXXXX";
    const int out_fd = mkstemp(out_path);
    if (out_fd < 0) return std::nullopt;
    std::vector<std::string> args = argv;
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_fd);
    std::optional<int> code;
    if (rc == 0) {
        const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
        pollfd p{pidfd, POLLIN, 0};
        int n = -1;
        do {
            n = poll(&p, 1, static_cast<int>(timeout.count()));
        } while (n < 0 && errno == EINTR);
        if (n <= 0) kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (n > 0 && WIFEXITED(status)) code = WEXITSTATUS(status);
        if (pidfd >= 0) close(pidfd);
    }
    if (output != nullptr) {
        std::ifstream in(out_path);
        std::stringstream ss;
        ss << in.rdbuf();
        *output = (rc == 0 ? "" : std::string("posix_spawn: ") + std::strerror(rc) + "\n") + ss.str();
    }
    unlink(out_path);
    return code;
}

} // namespace wharf::test_support
