// credit_pool: a connection's producer links hold at most the pool's credit
// together and take turns when it is spent; at a tick, credit beyond a
// link's even part is forgiven, and all of it after a long idle.

#include "broker/server/credit_budget.hpp"
#include "broker/server/credit_pool.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace wharf::server {
namespace {

// A pool with three links joined.
struct three_links {
    explicit three_links(uint64_t total) : p(total) {
        p.join(a);
        p.join(b);
        p.join(c);
    }
    credit_pool p;
    credit_pool::share a, b, c;
};

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
    three_links t(200);
    auto& [p, a, b, c] = t;
    EXPECT_EQ(p.grant(a, 1, 100), 100);
    EXPECT_EQ(p.grant(b, 2, 80), 80);
    EXPECT_EQ(p.grant(c, 3, 50), 20) << "what is left, when it is at least a chunk";
    EXPECT_EQ(p.outstanding(), 200);
    EXPECT_EQ(p.grant(a, 1, 10), 0) << "spent: a waits";
    EXPECT_EQ(p.waiting(), 1u);
    EXPECT_EQ(p.grant(a, 1, 10), 0);
    EXPECT_EQ(p.waiting(), 1u) << "in line once";
}

TEST(credit_pool, used_credit_goes_to_the_links_waiting_in_turn) {
    three_links t(100);
    auto& [p, a, b, c] = t;
    ASSERT_EQ(p.grant(a, 1, 100), 100);
    EXPECT_EQ(p.grant(b, 2, 30), 0) << "spent: b waits, new as it is";
    EXPECT_EQ(p.grant(c, 3, 30), 0) << "and c behind it";
    EXPECT_EQ(p.next(), 0u) << "no room yet";
    p.holds(a, 60); // a used 40
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

TEST(credit_pool, credit_beyond_a_links_even_part_is_forgiven_at_a_tick) {
    credit_pool p(2000);
    credit_pool::share a, b, late;
    p.join(a);
    ASSERT_EQ(p.grant(a, 1, 1000), 1000);
    p.join(b);
    ASSERT_EQ(p.grant(b, 2, 1000), 1000);
    p.join(late);
    const int64_t part = p.window(1000);
    ASSERT_EQ(part, 666);
    EXPECT_EQ(p.grant(late, 3, part), 0) << "a and b hold it all";
    p.tick(part);
    EXPECT_EQ(p.outstanding(), 2 * part) << "what a and b hold beyond their part no longer counts";
    EXPECT_EQ(p.next(), 3u);
    credit_pool::served(late);
    EXPECT_EQ(p.grant(late, 3, part, true), part);
    EXPECT_EQ(p.holders(), 3u);
    p.leave(late);
    EXPECT_EQ(p.outstanding(), 2 * part) << "a leaver gives back what it held";
    p.holds(a, 0);
    EXPECT_EQ(p.holders(), 1u) << "a used all it held; b still holds";
    p.tick(100); // as if the even part fell to 100
    EXPECT_EQ(p.outstanding(), 100) << "b, listed in a's place now, is still ticked";
}

TEST(credit_pool, a_holder_within_its_part_is_forgiven_once_passed_over_twice) {
    credit_pool p(100);
    credit_pool::share slow, busy;
    p.join(slow);
    p.join(busy);
    ASSERT_EQ(p.grant(slow, 1, 50), 50);
    ASSERT_EQ(p.grant(busy, 2, 50), 50);
    // busy uses a credit a tick, for many ticks (time alone forgives nothing
    // while credit comes back), until it has used twice the pool.
    int64_t busy_credit = 50;
    for (int t = 1; t < 200; ++t) {
        p.holds(busy, --busy_credit);
        if (busy_credit == 0) busy_credit = p.grant(busy, 2, 50);
        p.tick(50);
        ASSERT_EQ(p.outstanding(), 50 + busy_credit) << "tick " << t << ": slow's 50 still count";
    }
    p.holds(busy, --busy_credit);
    p.tick(50);
    EXPECT_EQ(p.outstanding(), busy_credit) << "others used 200 since slow last did: forgiven";
}

TEST(credit_pool, a_stuck_line_forgives_holders_idle_for_stuck_ticks) {
    credit_pool p(100);
    std::vector<credit_pool::share> s(10);
    for (auto& x : s) p.join(x);
    const int64_t part = p.window(1000);
    ASSERT_EQ(part, credit_pool::default_chunk);
    for (uint64_t i = 0; i < 5; ++i) ASSERT_EQ(p.grant(s[i], i + 1, part), part); // done with a burst, holding a turn
    ASSERT_EQ(p.grant(s[5], 6, part), 0);
    for (int t = 1; t < credit_pool::stuck_ticks; ++t) {
        p.tick(part);
        ASSERT_EQ(p.outstanding(), 100) << "tick " << t << ": not stuck long enough yet";
    }
    p.tick(part);
    EXPECT_EQ(p.outstanding(), 0) << "nothing came back for stuck_ticks: the idle holders are forgiven";
    EXPECT_EQ(p.holders(), 0u) << "a tick walks only the links that still hold credit";
    EXPECT_EQ(p.next(), 6u);
}

TEST(credit_pool, a_pool_smaller_than_a_chunk_still_grants) {
    credit_pool p(5);
    credit_pool::share a;
    p.join(a);
    EXPECT_EQ(p.grant(a, 1, 100), 5);
    p.holds(a, 0);
    EXPECT_EQ(p.grant(a, 1, 100), 5);
}

// The node's budget shared among the connections' pools: each gets an even
// share, at most its own connection budget and at least the floor; a
// connection that lets go gives its share back to the others.
TEST(credit_budget, pooled_connections_share_the_node_budget) {
    credit_budget node(1000);
    EXPECT_EQ(node.pool_part(2000), 1000u) << "no pool yet: as if it were the only one";
    std::vector<credit_budget::share> pools;
    pools.emplace_back(node, credit_budget::kind::pool);
    EXPECT_EQ(node.pool_part(2000), 1000u);
    EXPECT_EQ(node.pool_part(300), 300u) << "never more than the connection's own budget";
    for (int i = 0; i < 3; ++i) pools.emplace_back(node, credit_budget::kind::pool);
    EXPECT_EQ(node.pool_part(2000), 250u);
    EXPECT_EQ(node.links(), 0u) << "pools are not links";
    for (int i = 0; i < 96; ++i) pools.emplace_back(node, credit_budget::kind::pool);
    EXPECT_EQ(node.pool_part(2000), credit_budget::default_floor) << "100 pools: the floor";
    pools.resize(2);
    EXPECT_EQ(node.pools(), 2u);
    EXPECT_EQ(node.pool_part(2000), 500u) << "the others' shares come back";
    EXPECT_EQ(credit_budget(0).pool_part(2000), 2000u) << "no node budget: the connection's";
}

// A pool made smaller while its links hold more than the new size grants
// nothing until enough of it is used, and never shrinks below a chunk.
TEST(credit_pool, a_smaller_pool_grants_again_once_enough_is_used) {
    three_links t(200);
    auto& [p, a, b, c] = t;
    EXPECT_EQ(p.grant(a, 1, 100), 100);
    EXPECT_EQ(p.grant(b, 2, 100), 100);
    p.set_total(60);
    EXPECT_EQ(p.total(), 60);
    EXPECT_EQ(p.window(1000), credit_pool::default_chunk) << "60 over three links, at least a chunk";
    EXPECT_EQ(p.grant(c, 3, 20), 0) << "200 out of 60: c waits";
    p.holds(a, 0); // a used its 100: 100 out, still over 60
    EXPECT_EQ(p.next(), 0u);
    p.holds(b, 50); // b used half: 50 out, 10 left, less than a chunk
    EXPECT_EQ(p.next(), 0u);
    p.holds(b, 30); // 30 out: a chunk's room
    EXPECT_EQ(p.next(), 3u);
    EXPECT_EQ(p.grant(c, 3, 20, true), 20);
    EXPECT_EQ(p.outstanding(), 50);
    p.set_total(5);
    EXPECT_EQ(p.total(), credit_pool::default_chunk) << "never below a chunk";
    p.set_total(2000);
    EXPECT_EQ(p.total(), 2000);
}

} // namespace
} // namespace wharf::server
