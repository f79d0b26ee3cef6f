// credit_pool: a connection's producer links hold at most the pool's credit
// together and take turns when it is spent; idle links' credit is forgiven
// at a tick.

#include "broker/server/credit_pool.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace wharf::server {
namespace {

TEST(credit_pool, without_a_total_grants_what_is_asked) {
    credit_pool p(0);
    credit_pool::share s;
    p.join(s);
    EXPECT_FALSE(p.enabled());
    EXPECT_EQ(p.window(1000), 1000);
    EXPECT_EQ(p.grant(s, 1, 5000), 5000);
    EXPECT_EQ(p.waiting(), 0u);
}

TEST(credit_pool, a_link_holds_at_most_its_even_part_but_never_less_than_a_chunk) {
    credit_pool p(2000);
    std::vector<credit_pool::share> s(3);
    p.join(s[0]);
    EXPECT_EQ(p.window(1000), 1000) << "one link: its own window";
    p.join(s[1]);
    p.join(s[2]);
    EXPECT_EQ(p.window(1000), 666);
    std::vector<credit_pool::share> many(500);
    for (auto& m : many) p.join(m);
    EXPECT_EQ(p.window(1000), credit_pool::default_chunk);
}

TEST(credit_pool, the_pool_is_never_given_out_twice) {
    credit_pool p(200);
    credit_pool::share a, b, c;
    p.join(a);
    p.join(b);
    p.join(c);
    EXPECT_EQ(p.grant(a, 1, 100), 100);
    EXPECT_EQ(p.grant(b, 2, 80), 80);
    EXPECT_EQ(p.grant(c, 3, 50), 20) << "what is left, when it is at least a chunk";
    EXPECT_EQ(p.outstanding(), 200);
    EXPECT_EQ(p.grant(a, 1, 10), 0) << "spent: a waits";
    EXPECT_EQ(p.waiting(), 1u);
    EXPECT_EQ(p.grant(a, 1, 10), 0);
    EXPECT_EQ(p.waiting(), 1u) << "in line once";
}

TEST(credit_pool, a_new_link_may_start_from_a_spent_pool) {
    credit_pool p(100);
    credit_pool::share a, late;
    p.join(a);
    p.join(late);
    EXPECT_EQ(p.grant(a, 1, 100), 100);
    EXPECT_EQ(p.grant(late, 2, 50), credit_pool::default_chunk);
    EXPECT_EQ(p.outstanding(), 120);
    EXPECT_EQ(p.grant(late, 2, 50), 0) << "only its first grant comes from nothing";
}

TEST(credit_pool, used_credit_goes_to_the_links_waiting_in_turn) {
    credit_pool p(100);
    credit_pool::share a, b, c;
    p.join(a);
    p.join(b);
    p.join(c);
    ASSERT_EQ(p.grant(a, 1, 100), 100);
    ASSERT_EQ(p.grant(b, 2, 30), 20); // its start
    ASSERT_EQ(p.grant(c, 3, 30), 20);
    p.holds(b, 0);                      // b used its 20
    EXPECT_EQ(p.grant(b, 2, 30), 0) << "pool over-committed: b waits";
    p.holds(c, 0);
    EXPECT_EQ(p.grant(c, 3, 30), 0) << "and c behind it";
    EXPECT_EQ(p.next(), 0u) << "no room yet";
    p.holds(a, 60);                     // a used 40
    EXPECT_EQ(p.next(), 2u) << "b first";
    credit_pool::served(b);
    EXPECT_EQ(p.grant(b, 2, 30, true), 30);
    EXPECT_EQ(p.grant(a, 1, 40), 0) << "a goes behind c, though the pool has 10";
    EXPECT_EQ(p.next(), 0u) << "10 left: less than a chunk";
    p.holds(a, 30);
    EXPECT_EQ(p.next(), 3u);
    credit_pool::served(c);
    EXPECT_EQ(p.grant(c, 3, 30, true), 30);
    EXPECT_EQ(p.next(), 0u);
    EXPECT_EQ(p.outstanding(), 90);
}

TEST(credit_pool, idle_credit_is_forgiven_at_a_tick_and_a_leaver_gives_back) {
    credit_pool p(100);
    credit_pool::share idle, busy, waiting;
    p.join(idle);
    p.join(busy);
    p.join(waiting);
    ASSERT_EQ(p.grant(idle, 1, 60), 60);
    ASSERT_EQ(p.grant(busy, 2, 40), 40);
    ASSERT_EQ(p.grant(waiting, 3, 20), 20);
    p.holds(waiting, 0);
    ASSERT_EQ(p.grant(waiting, 3, 20), 0);
    for (int t = 1; t < credit_pool::idle_ticks; ++t) {
        p.holds(busy, 40 - t);          // busy uses one a tick
        p.tick(idle);
        p.tick(busy);
        p.tick(waiting);
        EXPECT_EQ(p.outstanding(), 100 - t) << "tick " << t << ": idle not yet forgiven";
    }
    p.holds(busy, 35);
    p.tick(idle);
    p.tick(busy);
    p.tick(waiting);
    EXPECT_EQ(p.outstanding(), 35) << "idle's 60 no longer counts";
    EXPECT_EQ(p.next(), 3u);
    credit_pool::served(waiting);
    EXPECT_EQ(p.grant(waiting, 3, 20, true), 20);
    for (int t = 0; t < credit_pool::idle_ticks; ++t) p.tick(busy);
    EXPECT_EQ(p.outstanding(), 20) << "busy used none for idle_ticks ticks";
    p.leave(waiting);
    EXPECT_EQ(p.outstanding(), 0);
}

TEST(credit_pool, a_pool_smaller_than_a_chunk_still_grants) {
    credit_pool p(5);
    credit_pool::share a;
    p.join(a);
    EXPECT_EQ(p.grant(a, 1, 100), 5);
    p.holds(a, 0);
    EXPECT_EQ(p.grant(a, 1, 100), 5);
}

} // namespace
} // namespace wharf::server
