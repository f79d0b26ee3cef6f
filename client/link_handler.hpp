#pragma once
// link_handler: what an application implements for a link it opens through
// cluster_client. It is a proton::messaging_handler: the library delivers
// every Proton event of the link (on_sender_open, on_sendable, on_message,
// on_tracker_*, on_*_error, on_*_close, ...) exactly as Proton would, except
// the ones that belong to a redirect, and adds the three hooks below.
//
// Its callbacks run on a Proton container thread: the thread of the
// connection the link currently lives on. After a redirect that can be
// another connection (and, with container::run(n > 1), another thread), but
// two callbacks for one link never overlap.

#include <proton/error_condition.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/tracker.hpp>

#include <string>

namespace wharf::client {

// Condition names of the errors the library itself reports (on_link_error).
// Errors that brokers send are delivered unchanged, with their own names.
inline constexpr const char* too_many_redirects = "wharf:client:too-many-redirects";
inline constexpr const char* redirect_unreachable = "wharf:client:redirect-unreachable";
inline constexpr const char* bad_redirect = "wharf:client:bad-redirect";
inline constexpr const char* connection_lost = "wharf:client:connection-lost";
inline constexpr const char* attach_failed = "wharf:client:attach-failed";

// A redirect the library is following (for logs; nothing to do about it).
struct redirect_info {
    bool sender = false;
    std::string address;     // the address the application opened
    std::string to_address;  // the address to attach to at the new node
    std::string from_node;   // the redirecting node's container id ("n1")
    std::string from;        // its host:port
    std::string to;          // host:port the link is re-attached at
    std::string description; // the redirect condition's description
    bool established = false; // the link was open (e.g. its queue moved)
    int hop = 0;             // 1 for the first redirect of this attach
};

// Why a link ended without a Proton link event: it could not be attached or
// re-attached where a redirect pointed, or its connection was lost. Nothing
// more is delivered for the link after this.
struct link_failure {
    bool sender = false;
    std::string address; // the address the application opened
    proton::error_condition condition;
};

class link_handler : public proton::messaging_handler {
  public:
    // Default: on_error(f.condition), whose Proton default throws — override it.
    virtual void on_link_failure(const link_failure& f) { on_error(f.condition); }

    // The link is moving to another node (a redirect during the attach, or
    // of an open link). Let go of the old proton::sender / receiver here: it
    // belongs to the old connection, and on_*_open brings the new one. For a
    // sender, on_tracker_unsettled_at_redirect follows for what was in flight.
    virtual void on_redirect(const redirect_info&) {}

    // Sender: a delivery that was in flight (sent, not settled) when an open
    // link was redirected. Its outcome will never be known: the library
    // settles it after this call. Default: on_tracker_release(t), then
    // on_tracker_settle(t) — so an application that re-sends released
    // messages re-sends these too (at least once). Do not send from inside
    // this callback: the old sender is gone; queue the message and send it
    // when on_sendable comes for the new sender (after on_sender_open). A
    // sender in at-most-once mode (pre-settled) gets none of these calls.
    virtual void on_tracker_unsettled_at_redirect(proton::tracker& t) {
        on_tracker_release(t);
        on_tracker_settle(t);
    }
};

} // namespace wharf::client
