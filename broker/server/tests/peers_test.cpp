// The connections between nodes, as the client of a relayed link sees them:
// always two nodes (start_relay_pair), whatever WHARF_COMPONENT_RELAY says.

#include "broker/server/tests/component_test.hpp"

#include <csignal>
#include <sys/types.h>

namespace wharf::server::test {
namespace {

class peers : public component_test {};

// Freezes a process (SIGSTOP) and thaws it (SIGCONT) when the scope ends,
// however the test ends, so that it can still be stopped cleanly.
class frozen_process {
  public:
    explicit frozen_process(int pid) : pid_(pid) {
        if (pid_ > 0) ::kill(pid_, SIGSTOP);
    }
    ~frozen_process() { thaw(); }
    frozen_process(const frozen_process&) = delete;
    frozen_process& operator=(const frozen_process&) = delete;
    void thaw() {
        if (pid_ > 0) ::kill(pid_, SIGCONT);
        pid_ = -1;
    }

  private:
    int pid_;
};

// An owner that falls silent without closing its connection (frozen, a VM
// paused, a cable cut without a reset) is noticed by the relaying node's
// idle-timeout: its relayed links end as when the connection drops.
TEST_F(peers, a_silent_owner_ends_its_relayed_links_after_the_idle_timeout) {
    // One worker each: a Proton 0.37 assertion was once seen in a node with
    // two that resumed after a freeze longer than its lease (docs/cluster.md).
    start_relay_pair({.args = {"--idle-timeout", "2", "--threads", "1"}});
    auto c = connect();
    test_receiver r = c->open_receiver("silent-owner", receiver_credit(10));
    ASSERT_TRUE(r.wait_open()) << r.wait_error();
    test_sender s = c->open_sender("silent-owner");
    ASSERT_TRUE(s.wait_open()) << s.wait_error();
    ASSERT_TRUE(s.wait_credit_at_least(1));

    const auto frozen_at = std::chrono::steady_clock::now();
    frozen_process freeze(owner().pid());
    s.send(text_message("sent to a frozen owner"));

    const auto err = r.wait_error(); // waits up to the client's 10 s
    const auto took = std::chrono::steady_clock::now() - frozen_at;
    ASSERT_TRUE(err.has_value()) << "the relayed consumer was not detached within 10 s of the owner freezing";
    EXPECT_EQ(err->name, "amqp:link:detach-forced") << *err;
    EXPECT_NE(err->description.find("node owner"), std::string::npos) << *err;
    EXPECT_NE(err->description.find("idle-timeout"), std::string::npos) << *err;
    EXPECT_LT(took, std::chrono::seconds(8)) << "idle-timeout 2 s";

    // The producer's unanswered message is settled so that it sends it again.
    const outcome out = s.wait_outcome(0);
    EXPECT_EQ(out.kind, outcome_kind::modified);
    EXPECT_TRUE(out.delivery_failed);
    const auto serr = s.wait_error();
    ASSERT_TRUE(serr.has_value());
    EXPECT_EQ(serr->name, "amqp:link:detach-forced") << *serr;

    // The client's own connection is not touched.
    EXPECT_FALSE(c->is_closed());
    EXPECT_FALSE(c->error().has_value()) << c->error();
    test_sender probe = c->open_anonymous_sender();
    EXPECT_TRUE(probe.wait_open()) << probe.wait_error();
}

} // namespace
} // namespace wharf::server::test
