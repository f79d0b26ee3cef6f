#include "client/tests/mini_broker.hpp"

#include "client/detail/pn_bridge.hpp"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/delivery.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/disposition.h>

#include <algorithm>
#include <chrono>

namespace wharf::client::test {

namespace {

std::string terminus_address(pn_terminus_t* t) {
    const char* a = pn_terminus_get_address(t);
    return a != nullptr ? a : "";
}

} // namespace

mini_broker::mini_broker(mini_broker_options o) : options_(std::move(o)), container_(*this, "mini-broker") {
    container_.auto_stop(false);
    thread_ = std::thread([this] { container_.run(); });
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::seconds(10),
                   [this] { return listening_done_; });
}

mini_broker::~mini_broker() {
    container_.stop();
    thread_.join();
}

void mini_broker::on_container_start(proton::container& c) { c.listen("127.0.0.1:0", *this); }

void mini_broker::on_open(proton::listener& l) {
    port_.store(static_cast<uint16_t>(l.port()));
    std::lock_guard lock(mu_);
    listening_done_ = true;
    cv_.notify_all();
}

void mini_broker::on_error(proton::listener&, const std::string&) {
    std::lock_guard lock(mu_);
    listening_done_ = true;
    cv_.notify_all();
}

proton::connection_options mini_broker::on_accept(proton::listener&) {
    return proton::connection_options().handler(*this);
}

bool mini_broker::muted(pn_link_t* c) const {
    if (options_.mute_address.empty()) return false;
    const bool sender = pn_link_is_sender(c);
    return terminus_address(sender ? pn_link_remote_source(c) : pn_link_remote_target(c)) == options_.mute_address;
}

// A consumer: its source is the queue (a dynamic one gets a fresh name).
void mini_broker::on_sender_open(proton::sender& s) {
    pn_link_t* c = detail::c_link(s);
    if (muted(c)) return;
    pn_terminus_copy(pn_link_source(c), pn_link_remote_source(c));
    pn_terminus_copy(pn_link_target(c), pn_link_remote_target(c));
    if (pn_terminus_is_dynamic(pn_link_remote_source(c)))
        pn_terminus_set_address(pn_link_source(c), ("tmp-" + std::to_string(++dynamic_)).c_str());
    pn_link_set_snd_settle_mode(c, pn_link_remote_snd_settle_mode(c));
    pn_link_open(c);
    const std::string address = terminus_address(pn_link_source(c));
    consumers_[address].push_back(s);
    dispatch(address);
}

// A producer: its target is the queue; an anonymous one names it per message.
void mini_broker::on_receiver_open(proton::receiver& r) {
    pn_link_t* c = detail::c_link(r);
    if (muted(c)) return;
    pn_terminus_copy(pn_link_source(c), pn_link_remote_source(c));
    pn_terminus_copy(pn_link_target(c), pn_link_remote_target(c));
    r.open(proton::receiver_options().credit_window(100).auto_accept(false));
}

void mini_broker::on_message(proton::delivery& d, proton::message& m) {
    std::string address = terminus_address(pn_link_target(detail::c_link(d.receiver())));
    if (address.empty()) address = m.to();
    const int n = ++received_;
    if (!options_.reject_address.empty() && address == options_.reject_address) {
        pn_delivery_t* pd = detail::c_delivery(d);
        pn_condition_t* cond = pn_disposition_condition(pn_delivery_local(pd));
        pn_condition_set_name(cond, options_.reject_condition.c_str());
        pn_condition_set_description(cond, options_.reject_description.c_str());
        d.reject();
        return;
    }
    if (options_.drop_every > 0 && n % options_.drop_every == 0) {
        ++dropped_;
        if (!d.settled()) d.accept();
        return;
    }
    if (options_.release_first && n == 1) {
        if (!d.settled()) d.release();
        return;
    }
    queues_[address].push_back(m);
    if (options_.duplicate_first && ++kept_ == 1) queues_[address].push_back(m);
    dispatch(address);
    if (!d.settled()) d.accept();
}

void mini_broker::on_sendable(proton::sender& s) { dispatch(terminus_address(pn_link_source(detail::c_link(s)))); }

void mini_broker::dispatch(const std::string& address) {
    auto& q = queues_[address];
    for (auto& s : consumers_[address]) {
        while (!q.empty() && s.active() && s.credit() > 0) {
            proton::tracker t = s.send(q.front());
            q.pop_front();
            if (pn_link_snd_settle_mode(detail::c_link(s)) == PN_SND_SETTLED) t.settle();
        }
    }
}

void mini_broker::on_sender_close(proton::sender& s) {
    for (auto& [address, list] : consumers_) std::erase(list, s);
}

void mini_broker::on_transport_close(proton::transport& t) {
    const proton::connection c = t.connection();
    for (auto& [address, list] : consumers_)
        std::erase_if(list, [&](const proton::sender& s) { return s.connection() == c; });
}

} // namespace wharf::client::test
