#pragma once
// etcd_cluster: a real etcd cluster for tests — `members` etcd processes
// (/usr/bin/etcd, or $WHARF_ETCD) on free 127.0.0.1 ports in a fresh
// temporary directory, with short heartbeat and election timeouts so that
// leader elections take well under a second. Nothing sleeps: start() polls
// the members with a deadline until the cluster answers.
//
// Owned by the test (or the test suite) that creates it; its thread only.
// The destructor stops every member (SIGTERM, then SIGKILL) and removes the
// directory.

#include <chrono>
#include <string>
#include <vector>

namespace wharf::wlm::test {

class etcd_cluster {
  public:
    explicit etcd_cluster(size_t members = 3);
    ~etcd_cluster();
    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    // Empty when the cluster answered; else why not (it is then stopped).
    const std::string& start_error() const { return start_error_; }
    // "127.0.0.1:P1,127.0.0.1:P2,..." (client URLs).
    std::string endpoints() const;
    // "etcd://ENDPOINTS/PREFIX".
    std::string spec(const std::string& prefix) const { return "etcd://" + endpoints() + prefix; }
    size_t size() const { return members_.size(); }
    uint16_t client_port(size_t i) const { return members_[i].client_port; }

    // SIGKILL to member i (its data stays); start(i) brings it back.
    void kill(size_t i);
    void start(size_t i);
    // SIGSTOP to member i: its connections stay open, it answers nothing;
    // thaw(i) lets it go on.
    void freeze(size_t i);
    void thaw(size_t i);
    // Waits until the members running answer with a leader.
    bool wait_healthy(std::chrono::milliseconds timeout);

  private:
    struct member {
        std::string name;
        uint16_t client_port = 0, peer_port = 0;
        int pid = -1;
    };
    void spawn(size_t i);
    void reap(size_t i);

    std::string dir_;
    std::string binary_;
    std::vector<member> members_;
    std::string start_error_;
};

} // namespace wharf::wlm::test
