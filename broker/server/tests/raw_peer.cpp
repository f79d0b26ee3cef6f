#include "broker/server/tests/raw_peer.hpp"

#include <proton/codec.h>
#include <proton/message.hpp>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <algorithm>

namespace wharf::server::test {

namespace {
std::string view_of(pn_bytes_t b) { return std::string(b.start, b.size); }
} // namespace

raw_peer::raw_peer(const std::string& address) : proactor_(pn_proactor()), conn_(pn_connection()) {
    pn_connection_set_container(conn_, "wharf-test-raw-peer");
    pn_connection_open(conn_);
    session_ = pn_session(conn_);
    pn_session_open(session_);
    pn_proactor_connect2(proactor_, conn_, nullptr, address.c_str());
}

raw_peer::~raw_peer() {
    if (!ended_) {
        pn_connection_close(conn_);
        run_until([this] { return ended_; }, std::chrono::milliseconds(5000));
    }
    pn_proactor_free(proactor_); // frees the connection too
}

namespace {
// The link's properties in its attach: symbol keys, string values.
void put_properties(pn_link_t* l, const raw_peer::properties& properties) {
    if (properties.empty()) return;
    pn_data_t* d = pn_link_properties(l);
    pn_data_put_map(d);
    pn_data_enter(d);
    for (const auto& [key, value] : properties) {
        pn_data_put_symbol(d, pn_bytes(key.size(), key.data()));
        pn_data_put_string(d, pn_bytes(value.size(), value.data()));
    }
    pn_data_exit(d);
}
} // namespace

pn_link_t* raw_peer::open_sender(const std::string& address, const properties& props) {
    pn_link_t* l = pn_sender(session_, ("raw-sender-" + address).c_str());
    pn_terminus_set_address(pn_link_target(l), address.c_str());
    put_properties(l, props);
    pn_link_open(l);
    return l;
}

pn_link_t* raw_peer::open_coordinator() {
    pn_link_t* l = pn_sender(session_, "raw-coordinator");
    pn_terminus_set_type(pn_link_target(l), PN_COORDINATOR);
    pn_link_open(l);
    return l;
}

pn_link_t* raw_peer::open_receiver(const std::string& address, int credit, bool presettled, bool top_up,
                                   uint64_t max_message_size, const properties& props) {
    pn_link_t* l = pn_receiver(session_, ("raw-receiver-" + address).c_str());
    pn_terminus_set_address(pn_link_source(l), address.c_str());
    put_properties(l, props);
    if (presettled) pn_link_set_snd_settle_mode(l, PN_SND_SETTLED);
    if (max_message_size != 0) pn_link_set_max_message_size(l, max_message_size);
    pn_link_open(l);
    pn_link_flow(l, credit);
    window_[l] = top_up ? credit : 0;
    return l;
}

void raw_peer::take_credit_back(pn_link_t* receiver) {
    if (const int credit = pn_link_credit(receiver); credit > 0) pn_link_flow(receiver, -credit);
}

size_t raw_peer::received_count(pn_link_t* receiver) const {
    auto it = received_.find(receiver);
    return it == received_.end() ? 0 : it->second.size();
}

bool raw_peer::run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout;
    pn_connection_wake(conn_); // what the test did since the last run goes out
    while (!pred()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (ended_ || left.count() <= 0) return pred();
        pn_proactor_set_timeout(proactor_, static_cast<pn_millis_t>(left.count()));
        pn_event_batch_t* batch = pn_proactor_wait(proactor_);
        while (pn_event_t* e = pn_event_batch_next(batch)) handle(e);
        pn_proactor_done(proactor_, batch);
    }
    return true;
}

void raw_peer::send(pn_link_t* sender, const std::string& bytes) {
    const uint64_t tag = next_tag_++;
    pn_delivery(sender, pn_dtag(reinterpret_cast<const char*>(&tag), sizeof tag));
    pn_link_send(sender, bytes.data(), bytes.size());
    pn_link_advance(sender);
}

bool raw_peer::remote_opened(pn_link_t* l) const { return (pn_link_state(l) & PN_REMOTE_ACTIVE) != 0; }

bool raw_peer::remote_closed(pn_link_t* l) const { return (pn_link_state(l) & PN_REMOTE_CLOSED) != 0; }

std::string raw_peer::remote_property(pn_link_t* l, const std::string& key) const {
    pn_data_t* d = pn_link_remote_properties(l);
    std::string found;
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP) return found;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        const bool match = pn_data_type(d) == PN_SYMBOL && view_of(pn_data_get_symbol(d)) == key;
        if (!pn_data_next(d)) break;
        if (match && pn_data_type(d) == PN_STRING) found = view_of(pn_data_get_string(d));
    }
    pn_data_exit(d);
    pn_data_rewind(d);
    return found;
}

std::vector<std::string> raw_peer::take_received_texts(pn_link_t* receiver) {
    std::vector<std::string> out;
    for (const std::string& bytes : take_received(receiver)) {
        proton::message m;
        m.decode(std::vector<char>(bytes.begin(), bytes.end()));
        out.push_back(proton::get<std::string>(m.body()));
    }
    return out;
}

std::vector<std::string> raw_peer::take_received(pn_link_t* receiver) {
    std::vector<std::string> out;
    out.swap(received_[receiver]);
    return out;
}

int raw_peer::max_credit(pn_link_t* sender) const {
    auto it = max_credit_.find(sender);
    return it == max_credit_.end() ? 0 : it->second;
}

void raw_peer::handle(pn_event_t* e) {
    switch (pn_event_type(e)) {
    case PN_LINK_FLOW: {
        pn_link_t* l = pn_event_link(e);
        if (pn_link_is_sender(l)) max_credit_[l] = std::max(max_credit_[l], pn_link_credit(l));
        break;
    }
    case PN_DELIVERY: {
        pn_delivery_t* d = pn_event_delivery(e);
        pn_link_t* l = pn_delivery_link(d);
        if (pn_link_is_receiver(l)) {
            if (!pn_delivery_readable(d) || pn_delivery_partial(d)) break;
            std::string bytes(pn_delivery_pending(d), '\0');
            pn_link_recv(l, bytes.data(), bytes.size());
            pn_link_advance(l);
            pn_delivery_settle(d);
            received_[l].push_back(std::move(bytes));
            if (const int credit = pn_link_credit(l); credit < window_[l] / 2) pn_link_flow(l, window_[l] - credit);
        } else if (pn_delivery_settled(d)) { // the peer settled it (with its outcome)
            ++settled_[l];
            if (pn_delivery_remote_state(d) == PN_ACCEPTED) ++accepted_[l];
            pn_delivery_settle(d);
        }
        break;
    }
    case PN_TRANSPORT_CLOSED: {
        pn_condition_t* c = pn_transport_condition(pn_event_transport(e));
        if (pn_condition_is_set(c)) {
            const char* name = pn_condition_get_name(c);
            const char* desc = pn_condition_get_description(c);
            error_ = std::string(name ? name : "") + ": " + (desc ? desc : "");
        }
        ended_ = true;
        break;
    }
    default:
        break;
    }
}

} // namespace wharf::server::test
