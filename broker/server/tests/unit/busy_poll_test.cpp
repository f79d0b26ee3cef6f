// poll_window: a worker polls before it sleeps only while its events come
// sooner than the limit, for about as long as they took, and only after a
// light batch; a worker whose events come further apart stops polling after
// a few; limit 0 never polls.

#include "broker/server/busy_poll.hpp"

#include <gtest/gtest.h>

namespace wharf::server {
namespace {

using us = std::chrono::microseconds;

TEST(poll_window, starts_closed_and_opens_when_an_event_came_soon) {
    poll_window w(us(200));
    EXPECT_EQ(w.window(1), us(0));
    w.idled(us(60)); // polling 60 us would have caught it
    EXPECT_EQ(w.window(1), us(60));
    w.idled(us(10)); // it doubles rather than shrinks while events stay close
    EXPECT_EQ(w.window(1), us(120));
    w.idled(us(150));
    EXPECT_EQ(w.window(1), us(200)); // never beyond the limit
    w.idled(us(199));
    EXPECT_EQ(w.window(1), us(200));
}

TEST(poll_window, a_very_soon_event_opens_the_smallest_useful_window) {
    poll_window w(us(200));
    w.idled(us(1));
    EXPECT_EQ(w.window(1), us(25)); // an eighth of the limit
}

TEST(poll_window, events_beyond_the_limit_close_it) {
    poll_window w(us(200));
    w.idled(us(200));
    ASSERT_EQ(w.window(1), us(200));
    // Events 201 us apart: the whole window polled in vain, then a sleep.
    // The idle time counts both, so the window closes (counting the sleep
    // alone, 1 us, would have kept it open for ever).
    w.idled(us(201));
    EXPECT_EQ(w.window(1), us(100));
    w.idled(std::chrono::seconds(1));
    EXPECT_EQ(w.window(1), us(50));
    w.idled(std::chrono::seconds(1));
    EXPECT_EQ(w.window(1), us(25));
    w.idled(std::chrono::seconds(1));
    EXPECT_EQ(w.window(1), us(0)); // below an eighth: closed, an idle node sleeps at once
    w.idled(std::chrono::seconds(1));
    EXPECT_EQ(w.window(1), us(0));
}

TEST(poll_window, no_poll_after_a_heavy_batch) {
    poll_window w(us(200));
    w.idled(us(100));
    EXPECT_EQ(w.window(poll_window::light_batch_events), us(100));
    // Many events at once: the node is loaded, and polling would take the
    // CPU its clients need. The window itself stays for the next light batch.
    EXPECT_EQ(w.window(poll_window::light_batch_events + 1), us(0));
    EXPECT_EQ(w.window(1), us(100));
}

TEST(poll_window, limit_zero_never_polls) {
    poll_window w(us(0));
    for (int i = 0; i < 3; ++i) {
        w.idled(us(0));
        w.idled(us(1));
        EXPECT_EQ(w.window(1), us(0));
    }
}

} // namespace
} // namespace wharf::server
