#pragma once
// The fixture shared by the config tests: a fresh temp dir per test for
// config files, and helpers that run load() and check errors.

#include "broker/config/node_config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <unistd.h>
#include <vector>

namespace wharf::config {

// A fresh temp dir per test for config files; removed afterwards.
class node_config_test : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (std::filesystem::temp_directory_path() / "wharf-config-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    std::string write(const std::string& name, const std::string& text) {
        auto path = (dir_ / name).string();
        std::ofstream(path) << text;
        return path;
    }

    static result<node_config, config_error> run(std::vector<std::string> args) {
        args.insert(args.begin(), "wharfd");
        std::vector<const char*> argv;
        for (const auto& a : args) argv.push_back(a.c_str());
        return load(static_cast<int>(argv.size()), argv.data());
    }

    static node_config run_ok(std::vector<std::string> args) {
        auto r = run(std::move(args));
        EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
        return r ? *r : node_config{};
    }

    static config_error run_error(std::vector<std::string> args) {
        auto r = run(std::move(args));
        EXPECT_FALSE(r.has_value());
        return r ? config_error{-1, "unexpectedly succeeded"} : r.error();
    }

    // Error from a file: exit code 2, message names the file, line and `needles`.
    config_error file_error(const std::string& text, int line,
                            std::initializer_list<std::string> needles) {
        auto path = write("bad.toml", text);
        auto err = run_error({"--config", path});
        EXPECT_EQ(err.exit_code, 2);
        EXPECT_NE(err.message.find("config " + path + ":" + std::to_string(line) + ":"),
                  std::string::npos)
            << err.message;
        for (const auto& n : needles) EXPECT_NE(err.message.find(n), std::string::npos) << err.message;
        return err;
    }

    static void flag_error(std::vector<std::string> args,
                           std::initializer_list<std::string> needles) {
        auto err = run_error(std::move(args));
        EXPECT_EQ(err.exit_code, 2);
        for (const auto& n : needles) EXPECT_NE(err.message.find(n), std::string::npos) << err.message;
    }

    std::filesystem::path dir_;
};

} // namespace wharf::config
