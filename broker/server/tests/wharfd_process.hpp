#pragma once
// wharfd_process: runs the wharfd built with these tests as a child process
// for one test, on 127.0.0.1 with an OS-chosen port, in a fresh temporary
// directory (config file, data dir, captured stderr).
//
// Owned by the test that creates it, used from the test's thread only. The
// destructor stops the broker with SIGTERM and (if the options say so)
// expects exit code 0. Nothing here sleeps: every wait polls a file
// descriptor (the stdout pipe, a pidfd) with a deadline.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wharf::server::test {

// What the destructor checks when it stops the broker.
enum class exit_check { expect_zero, ignore };

struct wharfd_options {
    std::vector<std::string> args;   // extra command-line flags
    std::string config_toml;         // if set: written to <dir>/wharfd.toml, passed as --config
    std::string node_id = "ct";
    std::string log_level = "info";
    std::chrono::milliseconds start_timeout{15000};
    std::chrono::milliseconds stop_timeout{15000};
    exit_check on_stop = exit_check::expect_zero;
};

class wharfd_process {
  public:
    // Starts wharfd and waits (bounded) for its "listening on" line or its
    // exit, whichever comes first. Check listening() / exit_code().
    explicit wharfd_process(wharfd_options opts = {});
    ~wharfd_process();
    wharfd_process(const wharfd_process&) = delete;
    wharfd_process& operator=(const wharfd_process&) = delete;

    bool listening() const { return port_ != 0; }
    uint16_t port() const { return port_; }
    std::string url() const; // "127.0.0.1:PORT"
    // The exact first stdout line, without the newline.
    const std::string& ready_line() const { return ready_line_; }

    // Sends SIGTERM (if still running) and waits for the exit; the exit code,
    // or nullopt if it did not exit in time (it is then killed) or died by a
    // signal.
    std::optional<int> stop();
    // Waits for the process to exit by itself. nullopt on time-out/signal.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    bool running() const { return pid_ > 0 && !exited_; }
    // The child's process id (-1 if it did not start), e.g. to freeze it
    // with SIGSTOP; a test that does so sends SIGCONT before it ends.
    int pid() const { return pid_; }
    // A start the test gives up on (its port was taken): any exit is fine.
    void expect_any_exit() { opts_.on_stop = exit_check::ignore; }

    std::string stderr_text() const;
    const std::string& dir() const { return dir_; }

  private:
    bool reap(std::chrono::milliseconds timeout);

    wharfd_options opts_;
    std::string dir_;
    int pid_ = -1;
    int pidfd_ = -1;
    int stdout_fd_ = -1;
    uint16_t port_ = 0;
    std::string ready_line_;
    bool exited_ = false;
    std::optional<int> exit_code_;
};

} // namespace wharf::server::test
