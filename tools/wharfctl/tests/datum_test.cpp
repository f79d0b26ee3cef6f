#include "client/management/datum.hpp"
#include "tools/wharfctl/table.hpp"

#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>
#include <proton/symbol.hpp>

#include <gtest/gtest.h>

#include <map>

namespace wharf::ctl {
using namespace wharf::mgmt;

TEST(wharfctl_datum, amqp_map_with_lists_becomes_json) {
    std::vector<std::pair<proton::value, proton::value>> m;
    m.emplace_back(std::string("attributeNames"),
                   std::vector<proton::value>{std::string("name"), std::string("depth")});
    m.emplace_back(proton::symbol("results"),
                   std::vector<proton::value>{std::vector<proton::value>{std::string("q\"1"), int64_t{3}},
                                              std::vector<proton::value>{std::string("q2"), proton::value()}});
    m.emplace_back(std::string("ok"), true);
    m.emplace_back(std::string("u"), uint32_t{7});
    proton::value v;
    proton::codec::encoder e(v);
    e << proton::codec::encoder::map(m);
    const datum d = from_amqp(v);
    EXPECT_EQ(to_json(d), R"({"attributeNames":["name","depth"],"results":[["q\"1",3],["q2",null]],"ok":true,"u":7})");
    ASSERT_NE(d.find("ok"), nullptr);
    EXPECT_EQ(d.find("u")->as_int(), 7);
    EXPECT_EQ(d.find("missing"), nullptr);
}

TEST(wharfctl_datum, pretty_json_indents) {
    datum d{datum::map{{"a", datum{datum::list{datum{int64_t{1}}}}}, {"b", datum{datum::map{}}}}};
    EXPECT_EQ(to_json(d, true), "{\n  \"a\": [1],\n  \"b\": {}\n}");
    datum rows{datum::list{datum{datum::list{datum{std::string("q")}, datum{int64_t{2}}}}}};
    EXPECT_EQ(to_json(rows, true), "[\n  [\"q\", 2]\n]");
}

TEST(wharfctl_datum, cells) {
    EXPECT_EQ(to_cell(datum{}), "-");
    EXPECT_EQ(to_cell(datum{std::string("x")}), "x");
    EXPECT_EQ(to_cell(datum{false}), "false");
    EXPECT_EQ(to_cell(datum{datum::list{datum{std::string("a")}, datum{int64_t{2}}}}), "a,2");
    EXPECT_EQ(to_json(datum{std::string("tab\there\x01")}), "\"tab\\there\\u0001\"");
}

TEST(wharfctl_datum, arguments) {
    auto typed = [](const std::string& arg) { return parse_argument(arg)->second.type(); };
    EXPECT_EQ(typed("n=12"), proton::LONG);
    EXPECT_EQ(typed("n=-3"), proton::LONG);
    EXPECT_EQ(typed("n=1-2"), proton::STRING);
    EXPECT_EQ(typed("n=99999999999999999999"), proton::STRING);
    EXPECT_EQ(typed("b=true"), proton::BOOLEAN);
    EXPECT_EQ(typed("z=null"), proton::NULL_TYPE);
    EXPECT_EQ(typed("s=n3"), proton::STRING);
    EXPECT_EQ(typed("s="), proton::STRING);
    EXPECT_EQ(proton::get<std::string>(parse_argument("s=\"12\"")->second), "12");
    EXPECT_EQ(parse_argument("k=a=b")->first, "k");
    EXPECT_FALSE(parse_argument("novalue"));
    EXPECT_FALSE(parse_argument("=x"));
}

TEST(wharfctl_table, aligned_without_trailing_spaces) {
    EXPECT_EQ(format_table({"NAME", "DEPTH"}, {{"orders", "12"}, {"q", ""}}),
              "NAME    DEPTH\norders  12\nq\n");
    EXPECT_EQ(format_pairs({{"name", "q"}, {"depth", "3"}}), "name   q\ndepth  3\n");
}

} // namespace wharf::ctl
