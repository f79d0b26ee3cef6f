// test_sender and test_receiver: blocking views of one link of a test_client.

#include "broker/server/tests/test_client_handler.hpp"

namespace wharf::server::test {

// ---- test_sender ----------------------------------------------------------

bool test_sender::wait_open() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.opened || l.closed || l.error;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.opened && !l.closed && !l.error;
}
std::optional<amqp_error> test_sender::wait_error() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.closed || l.error.has_value();
    });
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).error;
}
bool test_sender::wait_closed() {
    return c_->wait_until([&] { return c_->link(id_).closed; });
}
int test_sender::credit() {
    auto credit = std::make_shared<int>(-1);
    c_->call([c = c_, id = id_, credit] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (l.sender) *credit = l.sender.credit();
    });
    std::lock_guard lock(c_->mu_);
    return *credit;
}
bool test_sender::wait_credit_at_least(int n) {
    // Credit changes arrive as on_sendable, which notifies: check it then.
    auto deadline = std::chrono::steady_clock::now() + c_->timeout();
    while (std::chrono::steady_clock::now() < deadline) {
        if (credit() >= n) return true;
        std::unique_lock lock(c_->mu_);
        c_->cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                        std::chrono::milliseconds(50)));
    }
    return credit() >= n;
}
std::string test_sender::remote_target_address() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_address;
}
uint64_t test_sender::remote_max_message_size() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_max_message_size;
}
size_t test_sender::send(const proton::message& m) {
    size_t index = 0;
    {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        index = l.queued++;
        l.pending.push_back(m);
    }
    c_->call([c = c_, id = id_] {
        std::lock_guard lock(c->mu_);
        c->handler_->pump(c->link(id));
    });
    return index;
}
size_t test_sender::sent_count() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).outcomes.size();
}
void test_sender::send_and_close(const std::vector<proton::message>& ms) {
    {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        for (const auto& m : ms) {
            ++l.queued;
            l.pending.push_back(m);
        }
    }
    c_->call([c = c_, id = id_] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        c->handler_->pump(l);
        if (l.sender && !l.closed) l.sender.close();
    });
}
bool test_sender::begin_unfinished(const std::string& bytes) {
    auto ok = std::make_shared<bool>(false);
    const bool ran = c_->call([c = c_, id = id_, bytes, ok] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (!l.sender || l.closed || l.unfinished != nullptr) return;
        pn_link_t* pl = pn_of(l.sender);
        l.unfinished = pn_delivery(pl, pn_dtag("unfinished", 10));
        pn_link_send(pl, bytes.data(), bytes.size()); // not advanced: more would follow
        *ok = true;
    });
    std::lock_guard lock(c_->mu_);
    return ran && *ok;
}
bool test_sender::abort_unfinished() {
    auto ok = std::make_shared<bool>(false);
    const bool ran = c_->call([c = c_, id = id_, ok] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (l.unfinished == nullptr) return;
        pn_delivery_abort(l.unfinished);
        l.unfinished = nullptr;
        *ok = true;
    });
    std::lock_guard lock(c_->mu_);
    return ran && *ok;
}
outcome test_sender::wait_outcome(size_t index) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return (l.outcomes.size() > index && l.outcomes[index].kind != outcome_kind::none) ||
               l.closed;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.outcomes.size() > index ? l.outcomes[index] : outcome{};
}
std::vector<outcome> test_sender::wait_outcomes(size_t count) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        if (l.closed) return true;
        if (l.outcomes.size() < count) return false;
        for (size_t i = 0; i < count; ++i)
            if (l.outcomes[i].kind == outcome_kind::none) return false;
        return true;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    std::vector<outcome> out(l.outcomes.begin(),
                             l.outcomes.begin() + static_cast<long>(std::min(count, l.outcomes.size())));
    return out;
}
void test_sender::close() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.sender && !l.closed) l.sender.close();
    });
}

// ---- test_receiver --------------------------------------------------------

bool test_receiver::wait_open() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.opened || l.closed || l.error;
    });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    return l.opened && !l.closed && !l.error;
}
std::optional<amqp_error> test_receiver::wait_error() {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.closed || l.error.has_value();
    });
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).error;
}
bool test_receiver::wait_closed() {
    return c_->wait_until([&] { return c_->link(id_).closed; });
}
std::string test_receiver::remote_source_address() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_address;
}
std::vector<std::string> test_receiver::remote_source_filters() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).remote_filters;
}
int test_receiver::credit() {
    auto credit = std::make_shared<int>(-1);
    c_->call([c = c_, id = id_, credit] {
        std::lock_guard lock(c->mu_);
        auto& l = c->link(id);
        if (l.receiver) *credit = l.receiver.credit();
    });
    std::lock_guard lock(c_->mu_);
    return *credit;
}
void test_receiver::add_credit(int n) {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.receiver && !l.closed) l.receiver.add_credit(static_cast<uint32_t>(n));
    });
}
void test_receiver::drain() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (!l.receiver || l.closed) return;
        try {
            l.receiver.drain();
        } catch (const std::exception& e) {
            l.error = amqp_error{"test-client:drain", e.what()};
        }
    });
}
std::optional<int> test_receiver::wait_drain_finished() {
    // Consumes one drain-finish event (one that came before this call counts).
    const bool ok = c_->wait_until([&] { return c_->link(id_).drain_finished > 0; });
    std::lock_guard lock(c_->mu_);
    auto& l = c_->link(id_);
    if (!ok) return std::nullopt;
    --l.drain_finished;
    return l.drain_credit;
}
std::vector<received_message> test_receiver::wait_messages(size_t count) {
    c_->wait_until([&] {
        auto& l = c_->link(id_);
        return l.messages.size() >= count || l.closed;
    });
    return messages();
}
std::vector<received_message> test_receiver::messages() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).messages;
}
size_t test_receiver::message_count() {
    std::lock_guard lock(c_->mu_);
    return c_->link(id_).messages.size();
}
void test_receiver::settle(size_t index, settle_as how) {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (index >= l.deliveries.size() || l.settled[index]) return;
        pn_delivery_t* d = pn_of(l.deliveries[index]);
        switch (how) {
        case settle_as::accept: pn_delivery_update(d, PN_ACCEPTED); break;
        case settle_as::reject: pn_delivery_update(d, PN_REJECTED); break;
        case settle_as::release: pn_delivery_update(d, PN_RELEASED); break;
        case settle_as::modified_failed:
            pn_disposition_set_failed(pn_delivery_local(d), true);
            pn_delivery_update(d, PN_MODIFIED);
            break;
        case settle_as::modified_undeliverable:
            pn_disposition_set_undeliverable(pn_delivery_local(d), true);
            pn_delivery_update(d, PN_MODIFIED);
            break;
        }
        pn_delivery_settle(d);
        l.settled[index] = true;
    });
}
void test_receiver::modify(size_t index, bool delivery_failed,
                           const std::vector<std::pair<std::string, std::string>>& annotations, bool string_keys) {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (index >= l.deliveries.size() || l.settled[index]) return;
        pn_delivery_t* d = pn_of(l.deliveries[index]);
        pn_disposition_t* disp = pn_delivery_local(d);
        pn_disposition_set_failed(disp, delivery_failed);
        pn_data_t* map = pn_disposition_annotations(disp);
        pn_data_put_map(map);
        pn_data_enter(map);
        for (const auto& [k, v] : annotations) {
            if (string_keys) pn_data_put_string(map, pn_bytes(k.size(), k.data()));
            else pn_data_put_symbol(map, pn_bytes(k.size(), k.data()));
            pn_data_put_string(map, pn_bytes(v.size(), v.data()));
        }
        pn_data_exit(map);
        pn_delivery_update(d, PN_MODIFIED);
        pn_delivery_settle(d);
        l.settled[index] = true;
    });
}
void test_receiver::settle_all(settle_as how) {
    size_t n = message_count();
    for (size_t i = 0; i < n; ++i) settle(i, how);
}
void test_receiver::close() {
    c_->call([=, c_ = c_, id_ = id_] {
        std::lock_guard lock(c_->mu_);
        auto& l = c_->link(id_);
        if (l.receiver && !l.closed) l.receiver.close();
    });
}

// ---- helpers ---------------------------------------------------------------

proton::message text_message(const std::string& body, const std::string& to) {
    proton::message m(body);
    if (!to.empty()) m.to(to);
    return m;
}

proton::receiver_options receiver_credit(int window) {
    proton::receiver_options o;
    o.credit_window(window).auto_accept(false);
    return o;
}

} // namespace wharf::server::test
