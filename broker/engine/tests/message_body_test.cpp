// message_ref: bodies keep their bytes whatever their size, however many are
// alive, and whichever thread frees them, while others are freed and made
// around them; a size beyond what a body can hold is refused.
#include "broker/engine/message_body.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace wharf::engine {
namespace {

// A recognisable pattern for body `i` of `n` bytes.
std::string pattern(size_t i, size_t n) {
    std::string s(n, '\0');
    for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>('a' + (i * 7 + k) % 26);
    return s;
}

TEST(message_body, every_size_keeps_its_bytes_while_others_come_and_go) {
    // Sizes on both sides of every 64-byte edge up to 1 KB and beyond, a
    // large body, and the empty body.
    std::vector<size_t> sizes{0, 1};
    for (size_t edge = 64; edge <= 1088; edge += 64) {
        for (size_t s : {edge - 9, edge - 8, edge - 7}) sizes.push_back(s);
    }
    sizes.push_back(65536);

    std::vector<message_ref> kept;
    for (int round = 0; round < 3; ++round) {
        std::vector<message_ref> churn;
        for (size_t i = 0; i < sizes.size(); ++i) {
            kept.push_back(message_ref::copy_of(pattern(i + round * 1000, sizes[i])));
            churn.push_back(message_ref::copy_of(pattern(i, sizes[i])));
        }
        churn.clear();  // freed while the kept ones live on
    }
    for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < sizes.size(); ++i) {
            const auto& m = kept[round * sizes.size() + i];
            ASSERT_EQ(m.size(), sizes[i]);
            EXPECT_EQ(m.bytes(), pattern(i + round * 1000, sizes[i])) << "size " << sizes[i];
        }
    }
}

TEST(message_body, a_size_beyond_the_largest_body_is_refused_before_allocating) {
    // Refused before any memory is asked for, so this allocates nothing.
    EXPECT_THROW(message_ref::allocate(message_ref::max_size + 1), std::length_error);
    EXPECT_THROW(message_ref::allocate(size_t{1} << 40), std::length_error);
}

TEST(message_body, many_bodies_freed_and_made_among_others_all_stay_intact) {
    // 100,000 bodies of 200 bytes (about 20 MB), every other one freed and
    // made anew at another size among those that stay.
    constexpr size_t kCount = 100000;
    std::vector<message_ref> bodies;
    bodies.reserve(kCount);
    for (size_t i = 0; i < kCount; ++i) bodies.push_back(message_ref::copy_of(pattern(i, 200)));
    for (size_t i = 0; i < kCount; i += 2) bodies[i] = message_ref{};  // free every other one
    for (size_t i = 0; i < kCount; i += 2) bodies[i] = message_ref::copy_of(pattern(i + 1, 190));
    for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(bodies[i].bytes(), i % 2 ? pattern(i, 200) : pattern(i + 1, 190)) << i;
    }
}

TEST(message_body, a_body_shared_with_another_thread_lives_until_its_last_reference) {
    std::vector<message_ref> made;
    for (size_t i = 0; i < 1000; ++i) made.push_back(message_ref::copy_of(pattern(i, 100 + i % 300)));
    std::vector<message_ref> copies = made;
    made.clear();  // the copies still hold every body
    std::thread other([&] {
        // Read, then free on this thread; then make new bodies here.
        for (size_t i = 0; i < copies.size(); ++i) {
            ASSERT_EQ(copies[i].bytes(), pattern(i, 100 + i % 300));
        }
        copies.clear();
        std::vector<message_ref> again;
        for (size_t i = 0; i < 1000; ++i) again.push_back(message_ref::copy_of(pattern(i + 5, 100 + i % 300)));
        for (size_t i = 0; i < again.size(); ++i) ASSERT_EQ(again[i].bytes(), pattern(i + 5, 100 + i % 300));
    });
    other.join();
    EXPECT_TRUE(copies.empty());
}

} // namespace
} // namespace wharf::engine
