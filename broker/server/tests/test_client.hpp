#pragma once
// test_client: a blocking AMQP client for component tests, built on the
// Proton C++ container.
//
// Each test_client owns one proton::container running on a thread of its own,
// with exactly one connection. The test's thread calls the blocking methods
// below; they hand work to the connection's work_queue and wait for what the
// container thread records, always with a deadline (client_options::timeout),
// never with a sleep. Proton objects are touched only on the container thread;
// the test thread sees copies (messages, outcomes, conditions) under a mutex.

#include <proton/connection_options.hpp>
#include <proton/message.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace wharf::server::test {

// An AMQP error condition as the client saw it.
struct amqp_error {
    std::string name;
    std::string description;
};
std::ostream& operator<<(std::ostream& o, const amqp_error& e);
std::ostream& operator<<(std::ostream& o, const std::optional<amqp_error>& e);

enum class sasl_mode { none, anonymous };

struct client_options {
    sasl_mode sasl = sasl_mode::none;
    std::optional<std::chrono::milliseconds> idle_timeout; // unset: Proton's default (none)
    std::optional<uint32_t> max_frame_size;
    std::string container_id;                              // empty: a unique one
    std::chrono::milliseconds timeout{10000};              // every blocking wait
};

// The final state of one sent message as the sender saw it.
enum class outcome_kind { none, accepted, rejected, released, modified, settled_without_outcome };
std::ostream& operator<<(std::ostream& o, outcome_kind k);

struct outcome {
    outcome_kind kind = outcome_kind::none;
    std::optional<amqp_error> condition; // rejected only
    bool delivery_failed = false;        // modified only
    bool undeliverable_here = false;     // modified only
};

// One message as a receiver got it.
struct received_message {
    proton::message msg;
    bool settled_by_sender = false; // arrived pre-settled
};

// How the receiving test settles a delivery.
enum class settle_as { accept, reject, release, modified_failed, modified_undeliverable };

class test_client;

// A link's test-side handle; copyable, valid while its client lives.
class test_sender {
  public:
    bool wait_open();                              // attached without an error
    std::optional<amqp_error> wait_error();        // the detach condition, if one comes
    bool wait_closed();
    int credit();
    bool wait_credit_at_least(int n);
    std::string remote_target_address();
    uint64_t remote_max_message_size();
    // Queues a message; it goes out when there is credit. Returns its index.
    size_t send(const proton::message& m);
    size_t sent_count();                           // handed to Proton so far
    // Sends these messages (as far as the credit goes) and closes the link
    // in one go on the container thread: they leave in one write, the
    // detach right behind them.
    void send_and_close(const std::vector<proton::message>& ms);
    // Begins a delivery of these bytes (not a message: raw) and leaves it
    // unfinished, more to come; then aborts it (a transfer with
    // aborted=true). False if the link is gone or the deadline passed.
    // Nothing else may be sent on the link between the two.
    bool begin_unfinished(const std::string& bytes);
    bool abort_unfinished();
    outcome wait_outcome(size_t index);
    std::vector<outcome> wait_outcomes(size_t count); // the first `count` outcomes
    void close();
    int id() const { return id_; }

  private:
    friend class test_client;
    test_sender(test_client* c, int id) : c_(c), id_(id) {}
    test_client* c_;
    int id_;
};

class test_receiver {
  public:
    bool wait_open();
    std::optional<amqp_error> wait_error();
    bool wait_closed();
    std::string remote_source_address(); // the broker's answer (dynamic address)
    std::vector<std::string> remote_source_filters(); // the keys of the answer's filter (what is applied)
    int credit();
    void add_credit(int n);
    void drain();
    // Waits for on_receiver_drain_finish; returns the credit the link had then.
    std::optional<int> wait_drain_finished();
    // Waits until at least `count` messages have arrived; returns all so far.
    std::vector<received_message> wait_messages(size_t count);
    std::vector<received_message> messages(); // what has arrived so far
    size_t message_count();
    void settle(size_t index, settle_as how);
    void settle_all(settle_as how);   // every unsettled one received so far
    // Settles modified (delivery-failed as given) with message-annotations:
    // symbol keys, or string keys (which AMQP does not allow) when asked.
    void modify(size_t index, bool delivery_failed, const std::vector<std::pair<std::string, std::string>>& annotations,
                bool string_keys = false);
    void close();
    int id() const { return id_; }

  private:
    friend class test_client;
    test_receiver(test_client* c, int id) : c_(c), id_(id) {}
    test_client* c_;
    int id_;
};

class test_client {
  public:
    // Connects to host:port ("127.0.0.1:PORT"); see wait_open().
    explicit test_client(const std::string& address, client_options opts = {});
    ~test_client();
    test_client(const test_client&) = delete;
    test_client& operator=(const test_client&) = delete;

    bool wait_open();                              // the broker's open arrived
    std::optional<amqp_error> wait_error();        // connection or transport error
    bool wait_closed();                            // connection closed or transport gone
    bool wait_closed(std::chrono::milliseconds timeout);
    std::optional<amqp_error> error();             // without waiting
    bool is_closed();
    std::vector<std::string> offered_capabilities();
    std::string remote_container_id();

    test_sender open_sender(const std::string& address, proton::sender_options opts = {});
    // A sender whose target is null (anonymous relay), not an empty address.
    test_sender open_anonymous_sender(proton::sender_options opts = {});
    test_receiver open_receiver(const std::string& address, proton::receiver_options opts = {});

    // Runs f on the container thread and waits for it. False if the
    // connection's loop has ended or the deadline passed.
    bool call(std::function<void()> f);
    // Waits (bounded) until pred() holds; pred runs under the state mutex.
    bool wait_until(const std::function<bool()>& pred);
    bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
    void close();

    std::chrono::milliseconds timeout() const { return opts_.timeout; }

  private:
    friend class test_sender;
    friend class test_receiver;
    class handler;
    struct link_state;

    link_state& link(int id); // caller holds mu_

    client_options opts_;
    std::unique_ptr<handler> handler_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::thread thread_;
};

// Convenience: a message with a string body (and optionally a `to`).
proton::message text_message(const std::string& body, const std::string& to = {});
// Options for a receiver that grants `window` credit and refills it, or
// (window 0) only what add_credit() grants; auto_accept off either way.
proton::receiver_options receiver_credit(int window);

} // namespace wharf::server::test
