#include "broker/server/tests/test_client_handler.hpp"

namespace wharf::server::test {

std::ostream& operator<<(std::ostream& o, const amqp_error& e) {
    return o << e.name << " (" << e.description << ")";
}
std::ostream& operator<<(std::ostream& o, const std::optional<amqp_error>& e) {
    if (!e) return o << "no error";
    return o << *e;
}
std::ostream& operator<<(std::ostream& o, outcome_kind k) {
    switch (k) {
    case outcome_kind::none: return o << "none";
    case outcome_kind::accepted: return o << "accepted";
    case outcome_kind::rejected: return o << "rejected";
    case outcome_kind::released: return o << "released";
    case outcome_kind::modified: return o << "modified";
    case outcome_kind::settled_without_outcome: return o << "settled-without-outcome";
    }
    return o << "?";
}

// ---- test_client ----------------------------------------------------------

test_client::test_client(const std::string& address, client_options opts) : opts_(std::move(opts)) {
    proton::connection_options co;
    if (opts_.sasl == sasl_mode::none) co.sasl_enabled(false);
    else co.sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
    if (opts_.idle_timeout) co.idle_timeout(proton::duration(opts_.idle_timeout->count()));
    if (opts_.max_frame_size) co.max_frame_size(*opts_.max_frame_size);
    if (!opts_.container_id.empty()) co.container_id(opts_.container_id);
    handler_ = std::make_unique<handler>(*this, address, co);
    thread_ = std::thread([this] {
        try {
            handler_->container.run();
        } catch (const std::exception& e) {
            std::lock_guard lock(mu_);
            if (!handler_->error) handler_->error = amqp_error{"test-client:exception", e.what()};
        }
        std::lock_guard lock(mu_);
        handler_->ended = true;
        handler_->closed = true;
        cv_.notify_all();
    });
    wait_until([this] { return handler_->started || handler_->ended; });
}

test_client::~test_client() {
    close();
    wait_closed();
    bool ended = false;
    {
        std::lock_guard lock(mu_);
        ended = handler_->ended;
    }
    if (!ended) handler_->container.stop();
    thread_.join();
}

bool test_client::wait_until(const std::function<bool()>& pred) {
    return wait_until(pred, opts_.timeout);
}
bool test_client::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, std::chrono::steady_clock::now() + timeout, pred);
}

bool test_client::call(std::function<void()> f) {
    auto done = std::make_shared<bool>(false);
    proton::work_queue* wq = nullptr;
    {
        std::lock_guard lock(mu_);
        if (handler_->ended || handler_->wq == nullptr) return false;
        wq = handler_->wq;
    }
    const bool added = wq->add([this, f = std::move(f), done] {
        f();
        std::lock_guard lock(mu_);
        *done = true;
        cv_.notify_all();
    });
    if (!added) return false;
    return wait_until([this, done] { return *done || handler_->ended; }) && *done;
}

test_client::link_state& test_client::link(int id) { return handler_->links[id]; }

bool test_client::wait_open() {
    wait_until([this] { return handler_->opened || handler_->closed || handler_->error; });
    std::lock_guard lock(mu_);
    return handler_->opened && !handler_->error;
}
std::optional<amqp_error> test_client::wait_error() {
    wait_until([this] { return handler_->error.has_value() || handler_->closed; });
    std::lock_guard lock(mu_);
    return handler_->error;
}
bool test_client::wait_closed() { return wait_closed(opts_.timeout); }
bool test_client::wait_closed(std::chrono::milliseconds timeout) {
    return wait_until([this] { return handler_->closed; }, timeout);
}
std::optional<amqp_error> test_client::error() {
    std::lock_guard lock(mu_);
    return handler_->error;
}
bool test_client::is_closed() {
    std::lock_guard lock(mu_);
    return handler_->closed;
}
std::vector<std::string> test_client::offered_capabilities() {
    std::lock_guard lock(mu_);
    return handler_->offered_caps;
}
std::string test_client::remote_container_id() {
    std::lock_guard lock(mu_);
    return handler_->remote_container;
}

void test_client::close() {
    call([this] {
        if (handler_->conn && !handler_->conn.closed()) handler_->conn.close();
    });
}

test_sender test_client::open_sender(const std::string& address, proton::sender_options opts) {
    int id = 0;
    {
        std::lock_guard lock(mu_);
        id = handler_->next_link++;
        link(id).is_sender = true;
    }
    call([this, address, opts, id] {
        proton::sender s = handler_->conn.open_sender(address, opts);
        std::lock_guard lock(mu_);
        link(id).sender = s;
        handler_->link_ids[pn_of(s)] = id;
    });
    return test_sender(this, id);
}

test_sender test_client::open_anonymous_sender(proton::sender_options opts) {
    proton::target_options t;
    t.anonymous(true);
    opts.target(t);
    return open_sender("", opts);
}

test_receiver test_client::open_receiver(const std::string& address, proton::receiver_options opts) {
    int id = 0;
    {
        std::lock_guard lock(mu_);
        id = handler_->next_link++;
    }
    call([this, address, opts, id] {
        proton::receiver r = handler_->conn.open_receiver(address, opts);
        std::lock_guard lock(mu_);
        link(id).receiver = r;
        handler_->link_ids[pn_of(r)] = id;
    });
    return test_receiver(this, id);
}

} // namespace wharf::server::test
