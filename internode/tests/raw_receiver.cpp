#include "internode/tests/raw_receiver.hpp"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <gtest/gtest.h>

namespace wharf::internode::test {

namespace {

struct receive_state {
    size_t count = 0;
    std::vector<std::string> messages;
    std::string partial; // the delivery being received, across frames
    bool closing = false;
};

void on_delivery(receive_state& st, pn_delivery_t* d) {
    if (!pn_delivery_readable(d)) return;
    pn_link_t* l = pn_delivery_link(d);
    const size_t pending = pn_delivery_pending(d);
    const size_t old = st.partial.size();
    st.partial.resize(old + pending);
    const ssize_t got = pn_link_recv(l, st.partial.data() + old, pending);
    st.partial.resize(old + static_cast<size_t>(got < 0 ? 0 : got));
    if (pn_delivery_partial(d)) return; // more frames to come
    pn_link_advance(l);
    st.messages.push_back(std::move(st.partial));
    st.partial.clear();
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    if (st.messages.size() == st.count && !st.closing) {
        st.closing = true;
        pn_connection_close(pn_session_connection(pn_link_session(l)));
    }
}

} // namespace

std::vector<std::string> receive_raw(const std::string& host, uint16_t port, const std::string& address,
                                     size_t count, std::chrono::milliseconds timeout) {
    receive_state st;
    st.count = count;
    pn_proactor_t* proactor = pn_proactor();
    pn_connection_t* c = pn_connection();
    pn_connection_set_container(c, "raw-receiver");
    pn_connection_open(c);
    pn_session_t* s = pn_session(c);
    pn_session_open(s);
    pn_link_t* l = pn_receiver(s, "raw-receiver");
    pn_terminus_set_address(pn_link_source(l), address.c_str());
    pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
    pn_link_open(l);
    pn_link_flow(l, static_cast<int>(count));

    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, host.c_str(), std::to_string(port).c_str());
    pn_proactor_set_timeout(proactor, static_cast<pn_millis_t>(timeout.count()));
    pn_proactor_connect2(proactor, c, nullptr, addr); // no SASL layer

    bool done = false;
    while (!done) {
        pn_event_batch_t* batch = pn_proactor_wait(proactor);
        while (pn_event_t* e = pn_event_batch_next(batch)) {
            switch (pn_event_type(e)) {
            case PN_DELIVERY:
                on_delivery(st, pn_event_delivery(e));
                break;
            case PN_LINK_REMOTE_CLOSE: {
                pn_condition_t* cond = pn_link_remote_condition(pn_event_link(e));
                ADD_FAILURE() << "raw receiver's link closed: " << pn_condition_get_name(cond) << " "
                              << pn_condition_get_description(cond);
                pn_connection_close(c);
                break;
            }
            case PN_CONNECTION_REMOTE_CLOSE:
                pn_connection_close(c);
                break;
            case PN_PROACTOR_TIMEOUT:
                pn_proactor_disconnect(proactor, nullptr);
                break;
            case PN_TRANSPORT_CLOSED:
                pn_proactor_cancel_timeout(proactor);
                break;
            case PN_PROACTOR_INACTIVE:
                done = true;
                break;
            default:
                break;
            }
        }
        pn_proactor_done(proactor, batch);
    }
    pn_proactor_free(proactor);
    return st.messages;
}

} // namespace wharf::internode::test
