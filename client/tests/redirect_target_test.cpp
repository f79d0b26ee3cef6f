// redirect_target: urls and redirect info maps, without a network.

#include "client/redirect_target.hpp"

#include <gtest/gtest.h>

#include <proton/codec/map.hpp>
#include <proton/symbol.hpp>
#include <proton/value.hpp>

#include <map>

namespace wharf::client {
namespace {

TEST(parse_url, forms) {
    auto a = parse_url("127.0.0.1:5673");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->host, "127.0.0.1");
    EXPECT_EQ(a->port, 5673);
    EXPECT_EQ(a->url(), "amqp://127.0.0.1:5673");
    auto b = parse_url("amqp://broker");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->key(), "broker:5672");
    auto c = parse_url("amqps://[::1]:6000");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->scheme, "amqps");
    EXPECT_EQ(c->key(), "[::1]:6000");
    EXPECT_EQ(parse_url("amqps://h")->port, 5671);
}

TEST(parse_url, refuses_junk) {
    std::string why;
    EXPECT_FALSE(parse_url("", &why));
    EXPECT_FALSE(parse_url("http://h:1", &why));
    EXPECT_NE(why.find("scheme"), std::string::npos);
    EXPECT_FALSE(parse_url("h:", &why));
    EXPECT_FALSE(parse_url("h:70000", &why));
    EXPECT_FALSE(parse_url("h:12x", &why));
    EXPECT_FALSE(parse_url("[::1", &why));
    EXPECT_FALSE(parse_url("user@h:1", &why));
}

proton::error_condition redirect(std::map<proton::symbol, proton::value> info) {
    return proton::error_condition("amqp:link:redirect", "go there", info);
}

TEST(parse_redirect, reads_the_info_map) {
    auto t = parse_redirect(redirect({{proton::symbol("hostname"), std::string("vhost")},
                                      {proton::symbol("network-host"), std::string("10.0.0.2")},
                                      {proton::symbol("port"), uint32_t(5673)},
                                      {proton::symbol("address"), std::string("q2")}}));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->where.key(), "10.0.0.2:5673");
    EXPECT_EQ(t->hostname, "vhost");
    EXPECT_EQ(t->address, "q2");
}

TEST(parse_redirect, accepts_hostname_only_string_keys_and_other_port_types) {
    std::map<std::string, proton::value> info{{"hostname", std::string("::1")}, {"port", std::string("7000")}};
    auto t = parse_redirect(proton::error_condition("amqp:link:redirect", "", info));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->where.key(), "[::1]:7000");
    EXPECT_EQ(t->address, "");
    auto u = parse_redirect(redirect({{proton::symbol("network-host"), std::string("h")},
                                      {proton::symbol("port"), int64_t(5800)}}));
    ASSERT_TRUE(u);
    EXPECT_EQ(u->where.port, 5800);
}

TEST(parse_redirect, says_what_is_missing) {
    std::string why;
    EXPECT_FALSE(parse_redirect(proton::error_condition("amqp:not-found", "x"), &why));
    EXPECT_FALSE(parse_redirect(proton::error_condition("amqp:link:redirect", "x"), &why));
    EXPECT_NE(why.find("no info map"), std::string::npos) << why;
    EXPECT_FALSE(parse_redirect(redirect({{proton::symbol("port"), uint32_t(1)}}), &why));
    EXPECT_NE(why.find("no network-host"), std::string::npos) << why;
    EXPECT_FALSE(parse_redirect(redirect({{proton::symbol("hostname"), std::string("h")}}), &why));
    EXPECT_NE(why.find("no port"), std::string::npos) << why;
    EXPECT_FALSE(parse_redirect(
        redirect({{proton::symbol("hostname"), std::string("h")}, {proton::symbol("port"), uint32_t(0)}}), &why));
    EXPECT_NE(why.find("not a port"), std::string::npos) << why;
}

} // namespace
} // namespace wharf::client
