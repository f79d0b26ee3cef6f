#include "client/tests/redirect_peer.hpp"

#include "client/detail/pn_bridge.hpp"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/delivery.hpp>
#include <proton/receiver_options.hpp>
#include <proton/error_condition.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/codec.h>
#include <proton/condition.h>

#include <chrono>
#include <cstring>

namespace wharf::client::test {

redirect_peer::redirect_peer(const std::string& container_id, redirect_peer_options o)
    : hold_(o.hold), open_then_redirect_(o.open_then_redirect), container_(*this, container_id) {
    container_.auto_stop(false);
    thread_ = std::thread([this] { container_.run(); });
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::seconds(10),
                   [this] { return listening_done_; });
}

redirect_peer::~redirect_peer() {
    container_.stop();
    thread_.join();
}

void redirect_peer::on_container_start(proton::container& c) { c.listen("127.0.0.1:0", *this); }

void redirect_peer::on_open(proton::listener& l) {
    port_.store(static_cast<uint16_t>(l.port()));
    std::lock_guard lock(mu_);
    listening_done_ = true;
    cv_.notify_all();
}

void redirect_peer::on_error(proton::listener&, const std::string&) {
    std::lock_guard lock(mu_);
    listening_done_ = true;
    cv_.notify_all();
}

proton::connection_options redirect_peer::on_accept(proton::listener&) {
    return proton::connection_options().handler(*this);
}

namespace {

void put_text(pn_data_t* d, const char* key, const std::string& value) {
    pn_data_put_symbol(d, pn_bytes(std::strlen(key), key));
    pn_data_put_string(d, pn_bytes(value.size(), value.data()));
}

} // namespace

// Detaches (closing) with amqp:link:redirect to 127.0.0.1:target_. Through
// the C API: Proton C++ 0.37's link.close(error_condition) drops the
// condition's properties (it move-assigns them into a temporary).
void redirect_peer::redirect(pn_link_t* c, const std::string& address) {
    const uint16_t to = target_.load();
    pn_condition_t* cond = pn_link_condition(c);
    pn_condition_set_name(cond, "amqp:link:redirect");
    pn_condition_set_description(cond, ("queue '" + address + "' is at 127.0.0.1:" + std::to_string(to)).c_str());
    pn_data_t* info = pn_condition_info(cond);
    pn_data_clear(info);
    pn_data_put_map(info);
    pn_data_enter(info);
    put_text(info, "hostname", "127.0.0.1");
    put_text(info, "network-host", "127.0.0.1");
    pn_data_put_symbol(info, pn_bytes(4, "port"));
    pn_data_put_uint(info, to);
    put_text(info, "address", address);
    pn_data_exit(info);
    pn_link_close(c);
}

// Our sender serves a consumer: its source is the node; our receiver's target is.
std::string redirect_peer::address_of(pn_link_t* c) {
    const char* a = pn_terminus_get_address(pn_link_is_sender(c) ? pn_link_remote_source(c) : pn_link_remote_target(c));
    return a != nullptr ? a : "";
}

// Refuses the attach the way wharfd does (a null terminus, then the
// redirect), or opens the link as asked and then redirects it.
void redirect_peer::refuse_or_open(pn_link_t* c, bool sender) {
    if (open_then_redirect_) {
        pn_terminus_copy(pn_link_source(c), pn_link_remote_source(c));
        pn_terminus_copy(pn_link_target(c), pn_link_remote_target(c));
    } else {
        pn_terminus_set_type(sender ? pn_link_source(c) : pn_link_target(c), PN_UNSPECIFIED);
    }
    pn_link_open(c);
    redirect(c, address_of(c));
}

void redirect_peer::on_sender_open(proton::sender& s) {
    ++attaches_;
    refuse_or_open(detail::c_link(s), true);
}

void redirect_peer::on_receiver_open(proton::receiver& r) {
    ++attaches_;
    pn_link_t* c = detail::c_link(r);
    if (hold_ > 0) { // take messages, settle none, then redirect
        r.open(proton::receiver_options().credit_window(hold_ * 2).auto_accept(false));
        return;
    }
    refuse_or_open(c, false);
}

void redirect_peer::on_message(proton::delivery& d, proton::message&) {
    pn_link_t* c = detail::c_link(d.receiver());
    if (++held_[c] == hold_) redirect(c, address_of(c));
}

} // namespace wharf::client::test
