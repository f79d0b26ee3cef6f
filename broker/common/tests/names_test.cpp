// The names every layer checks: queue names are UTF-8 without control
// characters, so that a NUL cannot make two names one (Proton's termini are
// C strings) and a name can be typed back into a tool.

#include "broker/common/names.hpp"
#include "broker/common/text.hpp"

#include <gtest/gtest.h>

namespace wharf {
namespace {

TEST(names, utf8_prefix_stops_at_the_first_byte_that_is_not_utf8) {
    EXPECT_EQ(utf8_prefix("orders"), 6u);
    EXPECT_EQ(utf8_prefix("caf\xc3\xa9"), 5u);               // é
    EXPECT_EQ(utf8_prefix("\xe2\x82\xac"), 3u);              // €
    EXPECT_EQ(utf8_prefix("\xf0\x9f\x93\xa6"), 4u);          // U+1F4E6
    EXPECT_EQ(utf8_prefix("\xf4\x8f\xbf\xbf"), 4u);          // U+10FFFF
    EXPECT_EQ(utf8_prefix("ab\xff\xfe"), 2u);                // never in UTF-8
    EXPECT_EQ(utf8_prefix("a\xc0\xaf"), 1u);                 // overlong '/'
    EXPECT_EQ(utf8_prefix("\xe0\x80\xaf"), 0u);              // overlong, three bytes
    EXPECT_EQ(utf8_prefix("\xed\xa0\x80"), 0u);              // a surrogate
    EXPECT_EQ(utf8_prefix("\xf4\x90\x80\x80"), 0u);          // above U+10FFFF
    EXPECT_EQ(utf8_prefix("x\xe2\x82"), 1u);                 // cut short
    EXPECT_EQ(utf8_prefix("\xc3\x28"), 0u);                  // a bad continuation
}

TEST(names, a_queue_name_is_utf8_without_control_characters) {
    EXPECT_FALSE(check_queue_name("orders.eu-1"));
    EXPECT_FALSE(check_queue_name("caf\xc3\xa9"));
    const auto nul = check_queue_name(std::string("a\0b", 3));
    ASSERT_TRUE(nul);
    EXPECT_NE(nul->find("control character (at byte 1)"), std::string::npos) << *nul;
    const auto bad = check_queue_name("\xff\xfe");
    ASSERT_TRUE(bad);
    EXPECT_NE(bad->find("not UTF-8 (at byte 0)"), std::string::npos) << *bad;
    EXPECT_TRUE(check_queue_name(""));
    EXPECT_TRUE(check_queue_name(std::string(max_queue_name + 1, 'q')));
}

// What a peer sent, named in a description: UTF-8 kept, control
// characters and bytes that are not UTF-8 escaped (a NUL would cut the
// description short; a client decoding it would fail on the others).
TEST(names, printable_escapes_control_characters_and_bytes_that_are_not_utf8) {
    EXPECT_EQ(printable("caf\xc3\xa9 q"), "caf\xc3\xa9 q");
    EXPECT_EQ(printable(std::string("reply\0junk", 10)), "reply\\x00junk");
    EXPECT_EQ(printable("bad\xff\xfeq"), "bad\\xff\\xfeq");
    EXPECT_EQ(printable("a\x01\x7f\n"), "a\\x01\\x7f\\x0a");
    EXPECT_EQ(printable("\xc3"), "\\xc3") << "a sequence cut short";
    EXPECT_EQ(printable(""), "");
    // Cut to a length, at a character's start.
    EXPECT_EQ(printable(std::string(3000, '\x01'), 10), "\\x01\\x01...") << "not inside an escape";
    EXPECT_EQ(printable(std::string(3000, '\x01'), 8), "\\x01\\x01...");
    EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab...") << "not inside the two bytes of \xc3\xa9";
    EXPECT_EQ(printable("abc", 3), "abc");
}

} // namespace
} // namespace wharf
