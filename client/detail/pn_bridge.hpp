#pragma once
// The few Proton-C calls the library needs that Proton C++ 0.37 does not
// offer: a link's remote terminus type (a refused attach has a null one),
// the unsettled deliveries of a sender, a link's local terminus address and
// drain flag. Internal; include only from the library's .cpp files, on the
// thread of the connection that owns the objects.

#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/connection.h>
#include <proton/link.hpp>
#include <proton/terminus.h>
#include <proton/tracker.hpp>
#include <proton/transfer.hpp>

#include <string>

// proton::transfer's constructor from a pn_delivery_t is private and open
// only to internal::factory<transfer>, which Proton defines in a header it
// does not install. This specialization, with a member name of our own,
// builds a transfer from a C delivery; nothing else uses it.
namespace proton::internal {
template <> class factory<proton::transfer> {
  public:
    static proton::transfer wharf_from_c(pn_delivery_t* d) { return proton::transfer(d); }
};
} // namespace proton::internal

namespace wharf::client::detail {

// Proton keeps pn_object() protected; a copy of the wrapper in a derived
// class may call it on itself.
template <class Wrapper> class c_handle : public Wrapper {
  public:
    explicit c_handle(const Wrapper& w) : Wrapper(w) {}
    auto get() const { return this->pn_object(); }
};

inline pn_link_t* c_link(const proton::link& l) { return c_handle<proton::link>(l).get(); }
inline pn_delivery_t* c_delivery(const proton::transfer& t) { return c_handle<proton::transfer>(t).get(); }

// A tracker (a transfer with no data of its own) for a C delivery.
inline proton::tracker tracker_of(pn_delivery_t* d) {
    proton::tracker t;
    static_cast<proton::transfer&>(t) = proton::internal::factory<proton::transfer>::wharf_from_c(d);
    return t;
}

// The peer answered the attach with a null target (sender) or source
// (receiver): it refuses the link, and a detach with the reason follows
// (AMQP 1.0 §2.6.3).
inline bool refused_attach(const proton::link& l) {
    pn_link_t* c = c_link(l);
    pn_terminus_t* t = pn_link_is_sender(c) ? pn_link_remote_target(c) : pn_link_remote_source(c);
    return pn_terminus_get_type(t) == PN_UNSPECIFIED;
}

// The local node address: the target's for a sender, the source's for a receiver.
inline std::string local_address(const proton::link& l) {
    pn_link_t* c = c_link(l);
    const char* a = pn_terminus_get_address(pn_link_is_sender(c) ? pn_link_target(c) : pn_link_source(c));
    return a != nullptr ? a : "";
}

// Sets it, before the attach frame goes out (that is, in the callback that
// opened the link).
inline void set_local_address(const proton::link& l, const std::string& address) {
    pn_link_t* c = c_link(l);
    pn_terminus_set_address(pn_link_is_sender(c) ? pn_link_target(c) : pn_link_source(c), address.c_str());
}

inline bool local_closed(const proton::link& l) { return (pn_link_state(c_link(l)) & PN_LOCAL_CLOSED) != 0; }

inline bool drain_requested(const proton::link& l) { return pn_link_get_drain(c_link(l)); }

} // namespace wharf::client::detail
