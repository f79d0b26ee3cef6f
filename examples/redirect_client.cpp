// wharf-example-redirect: connects to any node of a Wharf cluster, sends N
// messages to a queue and receives them back, following link redirects with
// the wharf_client library; prints which node served the queue. See
// examples/README.md.
//
// Threads: the container runs on the main thread (one thread, so the
// handler needs no locks); a watchdog thread stops it after --timeout.

#include "client/cluster_client.hpp"

#include <CLI/CLI.hpp>

#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

using wharf::client::link_handler;

struct settings {
    std::string url = "127.0.0.1:5672";
    std::string address = "wharf-example";
    int count = 10;
    int timeout = 30;
};

// One handler for both links; both live on the one container thread.
class example_app : public link_handler {
  public:
    example_app(proton::container& c, const settings& s)
        : s_(s), client_(c), run_id_("run-" + std::to_string(getpid()) + "-" +
                                     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())) {
        for (int i = 0; i < s_.count; ++i) to_send_.push_back(i);
    }

    void start() {
        receiver_ref_ = client_.open_receiver(s_.url, s_.address, *this, proton::receiver_options().credit_window(100));
        sender_ref_ = client_.open_sender(s_.url, s_.address, *this);
    }
    int exit_code() const { return !failed_ && finished_ ? 0 : 1; }
    void summary() const {
        std::printf("sent %d, confirmed %d, received %d of %d (%d duplicate(s)); queue '%s' served by node %s "
                    "at %s (reached through %s, %d redirect(s))\n",
                    sent_, confirmed_, static_cast<int>(received_.size()), s_.count, duplicates_,
                    s_.address.c_str(), served_by_.c_str(), receiver_ref_.node_address().c_str(), s_.url.c_str(),
                    receiver_ref_.redirects());
    }
    void give_up(const std::string& why) {
        std::fprintf(stderr, "wharf-example-redirect: %s\n", why.c_str());
        failed_ = true;
        client_.close();
    }

  private:
    // ---- sender
    void on_sender_open(proton::sender& s) override {
        sender_ = s;
        std::printf("sender attached to '%s' at node %s (%s)\n", s_.address.c_str(),
                    s.connection().container_id().c_str(), sender_ref_.node_address().c_str());
    }
    void on_sendable(proton::sender& s) override {
        while (s.credit() > 0 && !to_send_.empty()) {
            const int n = to_send_.front();
            to_send_.pop_front();
            proton::message m(run_id_ + " #" + std::to_string(n));
            m.id(static_cast<uint64_t>(n));
            m.durable(true);
            in_flight_[s.send(m)] = n;
            ++sent_;
        }
    }
    void on_tracker_accept(proton::tracker& t) override {
        in_flight_.erase(t);
        ++confirmed_;
        finish_if_done();
    }
    void on_tracker_reject(proton::tracker& t) override {
        give_up("message rejected: " + t.sender().error().what());
    }
    // Released by the broker, or in flight when the queue moved: send again,
    // now if the sender has credit (no on_sendable may come: the credit is
    // there already), else when the (new) sender gets some. A message
    // released at a redirect comes after on_redirect, with no sender.
    void on_tracker_release(proton::tracker& t) override {
        if (auto it = in_flight_.find(t); it != in_flight_.end()) {
            to_send_.push_front(it->second);
            in_flight_.erase(it);
            --sent_;
        }
        if (sender_) on_sendable(sender_);
    }

    // ---- receiver
    void on_receiver_open(proton::receiver& r) override {
        served_by_ = r.connection().container_id();
        std::printf("receiver attached to '%s' at node %s (%s)\n", s_.address.c_str(), served_by_.c_str(),
                    receiver_ref_.node_address().c_str());
    }
    void on_message(proton::delivery&, proton::message& m) override {
        const std::string body = proton::get<std::string>(m.body());
        if (body.rfind(run_id_ + " ", 0) != 0) return; // left over from an earlier run: accepted, not counted
        // At least once: a message re-sent after a redirect or a release may
        // arrive twice. Count each id once.
        const proton::message_id id = m.id();
        if (id.type() != proton::ULONG || !received_.insert(proton::get<uint64_t>(id)).second) {
            ++duplicates_;
            return;
        }
        finish_if_done();
    }

    void finish_if_done() {
        if (static_cast<int>(received_.size()) < s_.count || confirmed_ < s_.count || finished_) return;
        finished_ = true;
        summary();
        client_.close();
    }

    // ---- both
    void on_redirect(const wharf::client::redirect_info& r) override {
        if (r.sender) sender_ = proton::sender(); // the old link: nothing more is sent on it
        std::printf("%s for '%s': node %s (%s) redirected to %s%s\n", r.sender ? "sender" : "receiver",
                    r.address.c_str(), r.from_node.c_str(), r.from.c_str(), r.to.c_str(),
                    r.established ? " (the queue moved)" : "");
    }
    void on_link_failure(const wharf::client::link_failure& f) override {
        give_up(std::string(f.sender ? "sender" : "receiver") + " for '" + f.address + "': " + f.condition.what());
    }
    void on_sender_error(proton::sender& s) override { give_up("sender: " + s.error().what()); }
    void on_receiver_error(proton::receiver& r) override { give_up("receiver: " + r.error().what()); }
    void on_error(const proton::error_condition& e) override { give_up(e.what()); }

    const settings& s_;
    wharf::client::cluster_client client_;
    const std::string run_id_;
    wharf::client::link_ref sender_ref_, receiver_ref_;
    std::deque<int> to_send_;
    std::map<proton::tracker, int> in_flight_;
    proton::sender sender_; // the current one (none between a redirect and the new open)
    std::set<uint64_t> received_; // distinct message ids of this run
    int sent_ = 0, confirmed_ = 0, duplicates_ = 0;
    bool failed_ = false;
    bool finished_ = false;
    std::string served_by_;
};

// Starts the links once the container runs, on its thread.
class starter : public proton::messaging_handler {
  public:
    explicit starter(example_app*& app) : app_(app) {}
    void on_container_start(proton::container&) override { app_->start(); }
    void on_error(const proton::error_condition& e) override { app_->give_up(e.what()); }

  private:
    example_app*& app_;
};

} // namespace

int main(int argc, char** argv) {
    settings s;
    CLI::App cli("Sends messages to a queue at any node of a Wharf cluster and receives them back, "
                 "following AMQP link redirects; prints which node served the queue.");
    cli.add_option("--url", s.url, "any node, HOST:PORT")->capture_default_str();
    cli.add_option("--address", s.address, "the queue")->capture_default_str();
    cli.add_option("--count", s.count, "messages to send and receive")->capture_default_str()->check(CLI::Range(1, 1000000));
    cli.add_option("--timeout", s.timeout, "seconds before giving up")->capture_default_str()->check(CLI::Range(1, 3600));
    CLI11_PARSE(cli, argc, argv);

    example_app* app = nullptr;
    starter start(app);
    proton::container container(start);
    example_app the_app(container, s); // its client must outlive container.run()
    app = &the_app;

    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool timed_out = false;
    std::thread watchdog([&] {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, std::chrono::seconds(s.timeout), [&] { return done; })) {
            timed_out = true;
            container.stop();
        }
    });
    try {
        container.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "wharf-example-redirect: %s\n", e.what());
    }
    {
        std::lock_guard lock(mu);
        done = true;
    }
    cv.notify_all();
    watchdog.join();
    if (timed_out) {
        std::fprintf(stderr, "wharf-example-redirect: gave up after %d s\n", s.timeout);
        the_app.summary();
        return 1;
    }
    return the_app.exit_code();
}
