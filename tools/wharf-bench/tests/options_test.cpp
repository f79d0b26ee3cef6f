#include "tools/wharf-bench/options.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using wharf::bench::bench_mode;
using wharf::bench::parse_options;
using wharf::bench::parse_result;

namespace {

parse_result parse(std::vector<std::string> args) {
    args.insert(args.begin(), "wharf-bench");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return parse_options(static_cast<int>(argv.size()), argv.data());
}

} // namespace

TEST(bench_options, user_and_password_for_sasl_plain) {
    const auto r = parse({"send", "--user", "guest", "--password", "secret"});
    ASSERT_TRUE(r.options);
    EXPECT_EQ(r.options->user, "guest");
    EXPECT_EQ(r.options->password, "secret");
}

TEST(bench_options, no_user_means_no_sasl_plain) {
    const auto r = parse({"send"});
    ASSERT_TRUE(r.options);
    EXPECT_TRUE(r.options->user.empty());
}

TEST(bench_options, password_without_user_is_refused) {
    const auto r = parse({"send", "--password", "secret"});
    EXPECT_FALSE(r.options);
    EXPECT_EQ(r.exit_code, 2);
}

TEST(bench_options, properties_are_name_value_pairs) {
    const auto r = parse({"send", "--property", "colour=red", "--property", "empty=", "--property", "eq=a=b"});
    ASSERT_TRUE(r.options);
    const std::vector<std::pair<std::string, std::string>> want{{"colour", "red"}, {"empty", ""}, {"eq", "a=b"}};
    EXPECT_EQ(r.options->properties, want);
    for (const char* bad : {"colour", "=red"}) {
        const auto refused = parse({"send", "--property", bad});
        EXPECT_FALSE(refused.options) << bad;
        EXPECT_EQ(refused.exit_code, 2) << bad;
    }
}

TEST(bench_options, listen_in_receive_mode) {
    const auto r = parse({"receive", "--listen", "127.0.0.1:0", "--count", "10"});
    ASSERT_TRUE(r.options);
    EXPECT_EQ(r.options->mode, bench_mode::receive);
    EXPECT_TRUE(r.options->listening());
    EXPECT_EQ(r.options->listen, "127.0.0.1:0");
}

TEST(bench_options, listen_in_other_modes_is_refused) {
    for (const char* mode : {"send", "pair", "latency"}) {
        const auto r = parse({mode, "--listen", "127.0.0.1:0"});
        EXPECT_FALSE(r.options) << mode;
        EXPECT_EQ(r.exit_code, 2) << mode;
    }
}
