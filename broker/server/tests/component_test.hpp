#pragma once
// component_test: the gtest fixture every component test uses — one wharfd
// per test, clients connected to it, and a few polling helpers.
// Test thread only.

#include "broker/server/tests/test_client.hpp"
#include "broker/server/tests/wharfd_process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace wharf::server::test {

class component_test : public ::testing::Test {
  protected:
    ~component_test() override;
    // Starts this test's broker; fails the test if it does not listen.
    // With WHARF_COMPONENT_RELAY=1 in the environment the broker the test
    // talks to is the front of a two-node cluster in relay mode, and every
    // queue lives at the other node (see relay_pair.cpp): the same tests
    // then check that relaying changes nothing a client can see.
    wharfd_process& start_broker(wharfd_options opts = {}) {
        if (relay_mode()) return start_relay_pair(std::move(opts));
        broker_ = std::make_unique<wharfd_process>(std::move(opts));
        EXPECT_TRUE(broker_->listening()) << broker_->stderr_text();
        return *broker_;
    }
    static bool relay_mode();
    // Two nodes in relay mode whatever the environment (see relay_pair.cpp);
    // returns the front, where clients connect.
    wharfd_process& start_relay_pair(wharfd_options opts);
    // The node that owns every queue in a relay pair (only after start_relay_pair).
    wharfd_process& owner() { return *owner_; }
    // A connected client (wait_open() already succeeded, or the test failed).
    std::unique_ptr<test_client> connect(client_options opts = {}) {
        auto c = std::make_unique<test_client>(broker_->url(), opts);
        EXPECT_TRUE(c->wait_open()) << "connection did not open: " << c->error();
        return c;
    }
    std::unique_ptr<test_client> connect_unchecked(client_options opts = {}) {
        return std::make_unique<test_client>(broker_->url(), opts);
    }
    wharfd_process& broker() { return *broker_; }

    // Sends bodies "<prefix>0".."<prefix>N-1" to `address` and expects every
    // one accepted.
    void send_texts(test_client& c, const std::string& address, int n,
                    const std::string& prefix = "m") {
        test_sender s = c.open_sender(address);
        ASSERT_TRUE(s.wait_open()) << s.wait_error();
        for (int i = 0; i < n; ++i) s.send(text_message(prefix + std::to_string(i)));
        auto outs = s.wait_outcomes(static_cast<size_t>(n));
        ASSERT_EQ(outs.size(), static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(outs[static_cast<size_t>(i)].kind, outcome_kind::accepted) << "message " << i;
        s.close();
    }

    // Returns once the broker has processed everything this client wrote
    // before the call. Needed after a settlement: Proton writes a settled
    // disposition after the transfers and flow produced in the same output
    // pass, so "settle, then send" can reach the broker as "send, settle".
    // Two attach round trips (anonymous senders need no queue) order it.
    // That `err` came, is the condition `name`, and says `fragment`.
    static void expect_condition(const std::optional<amqp_error>& err, const std::string& name,
                                 const std::string& fragment) {
        ASSERT_TRUE(err.has_value()) << "no error: the link stayed open";
        EXPECT_EQ(err->name, name) << *err;
        EXPECT_NE(err->description.find(fragment), std::string::npos) << err->description;
    }
    static void sync_with_broker(test_client& c) {
        for (int i = 0; i < 2; ++i) {
            test_sender probe = c.open_anonymous_sender();
            EXPECT_TRUE(probe.wait_open()) << probe.wait_error();
            probe.close();
        }
    }

    // Polls pred (every millisecond or so) until it holds or the deadline
    // passes. For conditions spread over several clients; a single client's
    // condition is better waited for with test_client::wait_until.
    static bool eventually(const std::function<bool()>& pred,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!pred()) {
            if (std::chrono::steady_clock::now() >= deadline) return pred();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return true;
    }

    static std::string body_of(const received_message& m) {
        return proton::get<std::string>(m.msg.body());
    }
    static std::vector<std::string> bodies(const std::vector<received_message>& ms) {
        std::vector<std::string> out;
        for (const auto& m : ms) out.push_back(body_of(m));
        return out;
    }
    static std::vector<std::string> expected_texts(int from, int to, const std::string& prefix = "m") {
        std::vector<std::string> out;
        for (int i = from; i < to; ++i) out.push_back(prefix + std::to_string(i));
        return out;
    }

  private:
    std::string cluster_dir_;               // relay mode: the metadata file's directory
    std::unique_ptr<wharfd_process> owner_; // relay mode: where the queues are
    std::unique_ptr<wharfd_process> broker_;
};

} // namespace wharf::server::test
