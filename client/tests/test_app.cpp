#include "client/tests/test_app.hpp"

#include <proton/connection.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>

namespace wharf::client::test {

// ---- recorded_link: test thread -----------------------------------------------

void recorded_link::set_ref(link_ref r) {
    std::lock_guard lock(mu_);
    ref_ = std::move(r);
}

link_ref recorded_link::ref() {
    std::lock_guard lock(mu_);
    return ref_;
}

bool recorded_link::wait_until(const std::function<bool()>& pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, std::chrono::steady_clock::now() + wait_limit, pred);
}

bool recorded_link::wait_open(int count) {
    return wait_until([&] { return opens_ >= count || failure_ || closed_; }) && opens_ >= count;
}

std::optional<link_failure> recorded_link::wait_failure() {
    wait_until([&] { return failure_.has_value() || closed_; });
    return failure();
}

bool recorded_link::wait_closed() {
    return wait_until([&] { return closed_; });
}

std::vector<std::string> recorded_link::events() {
    std::lock_guard lock(mu_);
    return events_;
}

std::optional<link_failure> recorded_link::failure() {
    std::lock_guard lock(mu_);
    return failure_;
}

std::string recorded_link::node() {
    std::lock_guard lock(mu_);
    return node_;
}

std::vector<int> recorded_link::credit_at_open() {
    std::lock_guard lock(mu_);
    return credit_at_open_;
}

int recorded_link::redirect_count() {
    std::lock_guard lock(mu_);
    return redirects_;
}

void recorded_link::send(const std::vector<std::string>& bodies) {
    link_ref r;
    {
        std::lock_guard lock(mu_);
        to_send_.insert(to_send_.end(), bodies.begin(), bodies.end());
        r = ref_;
    }
    r.post([this] { pump(); });
}

bool recorded_link::wait_accepted(size_t n) {
    return wait_until([&] { return accepted_ >= n || failure_ || closed_; }) && accepted_ >= n;
}

size_t recorded_link::accepted() {
    std::lock_guard lock(mu_);
    return accepted_;
}

size_t recorded_link::released() {
    std::lock_guard lock(mu_);
    return released_;
}

void recorded_link::grant(int n) {
    ref().post([this, n] {
        if (receiver_ && receiver_.active()) receiver_.add_credit(static_cast<uint32_t>(n));
    });
}

bool recorded_link::wait_received(size_t n) {
    return wait_until([&] { return received_.size() >= n || failure_ || closed_; }) && received_.size() >= n;
}

std::vector<std::string> recorded_link::received() {
    std::lock_guard lock(mu_);
    return received_;
}

// ---- recorded_link: link thread -----------------------------------------------

void recorded_link::note(std::string e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
}

void recorded_link::pump() {
    if (!sender_ || !sender_.active()) return;
    while (sender_.credit() > 0) {
        std::string body;
        {
            std::lock_guard lock(mu_);
            if (to_send_.empty()) return;
            body = to_send_.front();
            to_send_.pop_front();
        }
        in_flight_[sender_.send(proton::message(body))] = body;
    }
}

void recorded_link::on_sender_open(proton::sender& s) {
    sender_ = s;
    {
        std::lock_guard lock(mu_);
        ++opens_;
        node_ = s.connection().container_id();
    }
    note("sender_open@" + s.connection().container_id());
    pump();
}

void recorded_link::on_sendable(proton::sender&) { pump(); }

void recorded_link::on_sender_error(proton::sender& s) { note("sender_error:" + s.error().name()); }

void recorded_link::on_sender_close(proton::sender&) {
    sender_ = proton::sender();
    in_flight_.clear();
    {
        std::lock_guard lock(mu_);
        closed_ = true;
    }
    note("sender_close");
}

void recorded_link::on_sender_detach(proton::sender& s) { on_sender_close(s); }

void recorded_link::on_tracker_accept(proton::tracker& t) {
    in_flight_.erase(t);
    std::lock_guard lock(mu_);
    ++accepted_;
    cv_.notify_all();
}

void recorded_link::on_tracker_reject(proton::tracker& t) {
    in_flight_.erase(t);
    note("rejected:" + t.sender().error().name());
}

// Released by the broker, or in flight when the link was redirected: send it
// again, from the link's thread once this callback is over (the sender may be
// the old one now).
void recorded_link::on_tracker_release(proton::tracker& t) {
    auto it = in_flight_.find(t);
    link_ref r;
    {
        std::lock_guard lock(mu_);
        ++released_;
        if (it != in_flight_.end()) to_send_.push_front(it->second);
        r = ref_;
    }
    if (it != in_flight_.end()) in_flight_.erase(it);
    r.post([this] { pump(); });
}

void recorded_link::on_receiver_open(proton::receiver& r) {
    receiver_ = r;
    {
        std::lock_guard lock(mu_);
        ++opens_;
        node_ = r.connection().container_id();
        credit_at_open_.push_back(r.credit());
    }
    note("receiver_open@" + r.connection().container_id());
}

void recorded_link::on_message(proton::delivery&, proton::message& m) {
    std::lock_guard lock(mu_);
    received_.push_back(proton::get<std::string>(m.body()));
    cv_.notify_all();
}

void recorded_link::on_receiver_error(proton::receiver& r) { note("receiver_error:" + r.error().name()); }

void recorded_link::on_receiver_close(proton::receiver&) {
    receiver_ = proton::receiver();
    {
        std::lock_guard lock(mu_);
        closed_ = true;
    }
    note("receiver_close");
}

void recorded_link::on_receiver_detach(proton::receiver& r) { on_receiver_close(r); }

void recorded_link::on_error(const proton::error_condition& e) { note("error:" + e.what()); }

void recorded_link::on_link_failure(const link_failure& f) {
    sender_ = proton::sender();
    receiver_ = proton::receiver();
    in_flight_.clear();
    {
        std::lock_guard lock(mu_);
        failure_ = f;
    }
    note("link_failure:" + f.condition.name());
}

// The old link belongs to the old connection: let go of it here, on its
// thread. Its trackers in flight come next, as released.
void recorded_link::on_redirect(const redirect_info& r) {
    sender_ = proton::sender();
    receiver_ = proton::receiver();
    {
        std::lock_guard lock(mu_);
        ++redirects_;
    }
    note("redirect:" + r.from_node + "->" + r.to);
}

// ---- client_app -------------------------------------------------------------------

client_app::client_app(client_options o) {
    container_.auto_stop(false); // runs until the destructor stops it
    client_ = std::make_unique<cluster_client>(container_, std::move(o));
    thread_ = std::thread([this] { container_.run(); });
}

client_app::~client_app() {
    client_->close();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto any_open = [this] {
        for (const auto& c : client_->connections())
            if (c.open) return true;
        return false;
    };
    while (any_open() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1)); // a poll interval, with a deadline
    container_.stop();
    thread_.join();
}

} // namespace wharf::client::test
