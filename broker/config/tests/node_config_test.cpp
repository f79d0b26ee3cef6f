#include "broker/config/node_config.hpp"
#include "broker/config/tests/node_config_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <regex>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace wharf::config {
namespace {

using namespace std::chrono_literals;

std::string hostname() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

void expect_default_policy(const queue_policy& p) {
    EXPECT_EQ(p.max_depth_messages, 0u);
    EXPECT_EQ(p.max_depth_bytes, 0u);
    EXPECT_EQ(p.overflow, overflow_policy::block);
    EXPECT_EQ(p.dead_letter_queue, "DLQ");
    EXPECT_EQ(p.max_delivery_count, 10u);
    EXPECT_EQ(p.expiry, expiry_policy::drop);
    EXPECT_TRUE(p.durable);
}

// ---- defaults ---------------------------------------------------------------

TEST_F(node_config_test, no_arguments_gives_the_documented_defaults) {
    auto cfg = run_ok({});
    EXPECT_EQ(cfg.node_id, "wharf-" + hostname());
    ASSERT_EQ(cfg.listeners.size(), 1u);
    EXPECT_EQ(cfg.listeners[0].host, "127.0.0.1");
    EXPECT_EQ(cfg.listeners[0].port, 5672);
    EXPECT_EQ(cfg.listeners[0].max_frame_size, 65536u);
    EXPECT_EQ(cfg.listeners[0].idle_timeout, 60s);
    EXPECT_EQ(cfg.idle_timeout, 60s); // connections to other nodes
    EXPECT_EQ(cfg.data_dir, "./wharf-data");
    EXPECT_EQ(cfg.log_level, "info");
    EXPECT_EQ(cfg.threads, default_threads(std::thread::hardware_concurrency()));
    EXPECT_EQ(cfg.busy_poll_us, 200u);
    EXPECT_TRUE(cfg.auto_create_queues);
    EXPECT_EQ(cfg.max_connections, 10000u);
    EXPECT_EQ(cfg.max_message_size, 16u * 1024 * 1024);
    EXPECT_EQ(cfg.credit_window, 1000u);
    EXPECT_EQ(cfg.producer_credit_budget, 20000u);
    EXPECT_EQ(cfg.connection_credit_budget, 2000u);
    expect_default_policy(cfg.queue_defaults);
    EXPECT_TRUE(cfg.queues.empty());
}

TEST_F(node_config_test, threads_zero_resolves_to_one_less_than_the_cores) {
    EXPECT_EQ(run_ok({"--threads", "0"}).threads,
              default_threads(std::thread::hardware_concurrency()));
    EXPECT_EQ(default_threads(0), 1u); // the core count is unknown
    EXPECT_EQ(default_threads(1), 1u);
    EXPECT_EQ(default_threads(2), 1u);
    EXPECT_EQ(default_threads(16), 15u);
}

TEST_F(node_config_test, empty_file_gives_defaults_and_one_listener) {
    auto cfg = parse_toml("", "empty.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    ASSERT_EQ(cfg->listeners.size(), 1u);
    EXPECT_EQ(cfg->listeners[0].port, 5672);
    EXPECT_EQ(cfg->data_dir, "./wharf-data");
    expect_default_policy(cfg->queue_defaults);
}

TEST_F(node_config_test, the_example_file_loads_to_exactly_the_defaults) {
    auto cfg = run_ok({"--config", WHARF_CONFIG_EXAMPLE});
    auto none = run_ok({});
    EXPECT_EQ(cfg.node_id, none.node_id);
    ASSERT_EQ(cfg.listeners.size(), 1u);
    EXPECT_EQ(cfg.listeners[0].host, none.listeners[0].host);
    EXPECT_EQ(cfg.listeners[0].port, none.listeners[0].port);
    EXPECT_EQ(cfg.listeners[0].max_frame_size, none.listeners[0].max_frame_size);
    EXPECT_EQ(cfg.listeners[0].idle_timeout, none.listeners[0].idle_timeout);
    EXPECT_EQ(cfg.data_dir, none.data_dir);
    EXPECT_EQ(cfg.log_level, none.log_level);
    EXPECT_EQ(cfg.threads, none.threads);
    EXPECT_EQ(cfg.auto_create_queues, none.auto_create_queues);
    EXPECT_EQ(cfg.max_connections, none.max_connections);
    EXPECT_EQ(cfg.max_message_size, none.max_message_size);
    EXPECT_EQ(cfg.credit_window, none.credit_window);
    expect_default_policy(cfg.queue_defaults);
    EXPECT_TRUE(cfg.queues.empty());
}

TEST_F(node_config_test, the_example_file_commented_tables_are_valid) {
    // Uncommenting the example [[listener]] and [[queue]] tables must work too.
    std::ifstream in(WHARF_CONFIG_EXAMPLE);
    const std::regex commented_key(R"(^# (\[\[[a-z]+\]\]$|[a-z-]+ = ))");
    std::string text, line;
    while (std::getline(in, line)) {
        if (std::regex_search(line, commented_key) && !line.starts_with("# node-id"))
            line = line.substr(2);
        text += line + "\n";
    }
    auto cfg = parse_toml(text, "uncommented.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    EXPECT_EQ(cfg->listeners.size(), 2u);
    EXPECT_EQ(cfg->queues.size(), 2u);
}

// ---- every key --------------------------------------------------------------

constexpr const char* full_file = R"(
node-id = "n1"
listen = ["10.0.0.1:5000", "[::1]:0"]
data-dir = "/var/lib/wharf"
log-level = "debug"
threads = 3
busy-poll = 0
auto-create-queues = false
max-connections = 50
max-message-size = 1024
credit-window = 20
producer-credit-budget = 300
connection-credit-budget = 40
max-frame-size = 4096
idle-timeout = 2.5

[[listener]]
address = "0.0.0.0:5673"
max-frame-size = 1024
idle-timeout = 0

[[listener]]
address = "localhost:5674"

[queue-defaults]
max-depth-messages = 100
max-depth-bytes = 2000
overflow-policy = "reject"
dead-letter-queue = "dead"
max-delivery-count = 3
expiry-policy = "dead-letter"
durable = false

[[queue]]
name = "orders"

[[queue]]
name = "events"
max-depth-messages = 7
max-depth-bytes = 8
overflow-policy = "block"
dead-letter-queue = ""
max-delivery-count = 0
expiry-policy = "drop"
durable = true
)";

TEST_F(node_config_test, every_key_from_the_file) {
    auto cfg = run_ok({"--config", write("wharf.toml", full_file)});
    EXPECT_EQ(cfg.node_id, "n1");
    EXPECT_EQ(cfg.data_dir, "/var/lib/wharf");
    EXPECT_EQ(cfg.log_level, "debug");
    EXPECT_EQ(cfg.threads, 3u);
    EXPECT_EQ(cfg.busy_poll_us, 0u);
    EXPECT_FALSE(cfg.auto_create_queues);
    EXPECT_EQ(cfg.max_connections, 50u);
    EXPECT_EQ(cfg.max_message_size, 1024u);
    EXPECT_EQ(cfg.credit_window, 20u);
    EXPECT_EQ(cfg.producer_credit_budget, 300u);
    EXPECT_EQ(cfg.connection_credit_budget, 40u);

    ASSERT_EQ(cfg.listeners.size(), 4u);
    EXPECT_EQ(cfg.listeners[0].host, "10.0.0.1");
    EXPECT_EQ(cfg.listeners[0].port, 5000);
    EXPECT_EQ(cfg.listeners[1].host, "::1");
    EXPECT_EQ(cfg.listeners[1].port, 0);
    for (int i : {0, 1, 3}) { // no frame size / idle timeout of their own
        EXPECT_EQ(cfg.listeners[i].max_frame_size, 4096u) << i;
        EXPECT_EQ(cfg.listeners[i].idle_timeout, 2500ms) << i;
    }
    EXPECT_EQ(cfg.listeners[2].host, "0.0.0.0");
    EXPECT_EQ(cfg.listeners[2].port, 5673);
    EXPECT_EQ(cfg.listeners[2].max_frame_size, 1024u);
    EXPECT_EQ(cfg.listeners[2].idle_timeout, 0ms);
    EXPECT_EQ(cfg.idle_timeout, 2500ms); // the top-level one, not a listener's own
    EXPECT_EQ(cfg.listeners[3].host, "localhost");
    EXPECT_EQ(cfg.listeners[3].port, 5674);

    const auto& d = cfg.queue_defaults;
    EXPECT_EQ(d.max_depth_messages, 100u);
    EXPECT_EQ(d.max_depth_bytes, 2000u);
    EXPECT_EQ(d.overflow, overflow_policy::reject);
    EXPECT_EQ(d.dead_letter_queue, "dead");
    EXPECT_EQ(d.max_delivery_count, 3u);
    EXPECT_EQ(d.expiry, expiry_policy::dead_letter);
    EXPECT_FALSE(d.durable);

    ASSERT_EQ(cfg.queues.size(), 2u);
    EXPECT_EQ(cfg.queues[0].name, "orders"); // all inherited
    EXPECT_EQ(cfg.queues[0].policy.max_depth_messages, 100u);
    EXPECT_EQ(cfg.queues[0].policy.overflow, overflow_policy::reject);
    EXPECT_EQ(cfg.queues[0].policy.dead_letter_queue, "dead");
    EXPECT_FALSE(cfg.queues[0].policy.durable);
    const auto& e = cfg.queues[1].policy; // all overridden
    EXPECT_EQ(cfg.queues[1].name, "events");
    EXPECT_EQ(e.max_depth_messages, 7u);
    EXPECT_EQ(e.max_depth_bytes, 8u);
    EXPECT_EQ(e.overflow, overflow_policy::block);
    EXPECT_EQ(e.dead_letter_queue, "");
    EXPECT_EQ(e.max_delivery_count, 0u);
    EXPECT_EQ(e.expiry, expiry_policy::drop);
    EXPECT_TRUE(e.durable);
}

TEST_F(node_config_test, every_key_from_flags) {
    auto cfg = run_ok({"--node-id", "n2", "--listen", "127.0.0.2:6000", "--listen=[::]:6001",
                       "--data-dir", "d", "--log-level", "trace", "--threads", "5", "--busy-poll", "1000",
                       "--auto-create-queues", "false", "--max-connections", "0",
                       "--max-message-size", "999", "--credit-window", "1",
                       "--producer-credit-budget", "0", "--connection-credit-budget", "0",
                       "--max-frame-size", "512", "--idle-timeout", "0.25"});
    EXPECT_EQ(cfg.node_id, "n2");
    ASSERT_EQ(cfg.listeners.size(), 2u);
    EXPECT_EQ(cfg.listeners[0].host, "127.0.0.2");
    EXPECT_EQ(cfg.listeners[0].port, 6000);
    EXPECT_EQ(cfg.listeners[1].host, "::");
    EXPECT_EQ(cfg.listeners[1].port, 6001);
    for (const auto& l : cfg.listeners) {
        EXPECT_EQ(l.max_frame_size, 512u);
        EXPECT_EQ(l.idle_timeout, 250ms);
    }
    EXPECT_EQ(cfg.data_dir, "d");
    EXPECT_EQ(cfg.log_level, "trace");
    EXPECT_EQ(cfg.threads, 5u);
    EXPECT_EQ(cfg.busy_poll_us, 1000u);
    EXPECT_FALSE(cfg.auto_create_queues);
    EXPECT_EQ(cfg.max_connections, 0u);
    EXPECT_EQ(cfg.max_message_size, 999u);
    EXPECT_EQ(cfg.credit_window, 1u);
    EXPECT_EQ(cfg.producer_credit_budget, 0u);
    EXPECT_EQ(cfg.connection_credit_budget, 0u);
}

TEST_F(node_config_test, flags_override_the_file) {
    auto path = write("wharf.toml", full_file);
    auto cfg = run_ok({"--config", path, "--node-id", "n2", "--listen", "127.0.0.2:6000",
                       "--data-dir", "d", "--log-level", "error", "--threads", "7", "--busy-poll", "50",
                       "--auto-create-queues", "true", "--max-connections", "9",
                       "--max-message-size", "10", "--credit-window", "11",
                       "--max-frame-size", "600", "--idle-timeout", "1"});
    EXPECT_EQ(cfg.node_id, "n2");
    ASSERT_EQ(cfg.listeners.size(), 1u); // --listen replaces the file's listeners
    EXPECT_EQ(cfg.listeners[0].port, 6000);
    EXPECT_EQ(cfg.listeners[0].max_frame_size, 600u);
    EXPECT_EQ(cfg.listeners[0].idle_timeout, 1s);
    EXPECT_EQ(cfg.idle_timeout, 1s);
    EXPECT_EQ(cfg.data_dir, "d");
    EXPECT_EQ(cfg.log_level, "error");
    EXPECT_EQ(cfg.threads, 7u);
    EXPECT_EQ(cfg.busy_poll_us, 50u); // over the file's 0
    EXPECT_TRUE(cfg.auto_create_queues);
    EXPECT_EQ(cfg.max_connections, 9u);
    EXPECT_EQ(cfg.max_message_size, 10u);
    EXPECT_EQ(cfg.credit_window, 11u);
    EXPECT_EQ(cfg.queues.size(), 2u); // the file's queues stay
}

TEST_F(node_config_test, frame_size_flag_applies_to_file_listeners_without_their_own) {
    auto path = write("wharf.toml", full_file);
    auto cfg = run_ok({"--config", path, "--max-frame-size", "700"});
    ASSERT_EQ(cfg.listeners.size(), 4u);
    EXPECT_EQ(cfg.listeners[0].max_frame_size, 700u);
    EXPECT_EQ(cfg.listeners[2].max_frame_size, 1024u); // its own
    EXPECT_EQ(cfg.listeners[3].max_frame_size, 700u);
    EXPECT_EQ(cfg.listeners[3].idle_timeout, 2500ms); // from the file
}

TEST_F(node_config_test, top_level_frame_size_applies_to_the_default_listener) {
    auto cfg = parse_toml("max-frame-size = 1000\nidle-timeout = 5", "f.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    ASSERT_EQ(cfg->listeners.size(), 1u);
    EXPECT_EQ(cfg->listeners[0].port, 5672);
    EXPECT_EQ(cfg->listeners[0].max_frame_size, 1000u);
    EXPECT_EQ(cfg->listeners[0].idle_timeout, 5s);
}

TEST_F(node_config_test, queue_inherits_defaults_declared_after_it_and_overrides_some) {
    auto cfg = parse_toml(R"(
[[queue]]
name = "a"
max-depth-bytes = 5

[queue-defaults]
max-depth-bytes = 1
max-delivery-count = 4
)",
                          "f.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    ASSERT_EQ(cfg->queues.size(), 1u);
    EXPECT_EQ(cfg->queues[0].policy.max_depth_bytes, 5u);
    EXPECT_EQ(cfg->queues[0].policy.max_delivery_count, 4u);
    EXPECT_EQ(cfg->queues[0].policy.dead_letter_queue, "DLQ"); // built-in default
}

TEST_F(node_config_test, parse_toml_builds_on_base) {
    node_config base;
    base.node_id = "from-base";
    base.credit_window = 77;
    auto cfg = parse_toml("credit-window = 5", "f.toml", base);
    ASSERT_TRUE(cfg) << cfg.error().message;
    EXPECT_EQ(cfg->node_id, "from-base");
    EXPECT_EQ(cfg->credit_window, 5u);
}

// ---- parse_listen -----------------------------------------------------------

TEST(node_config_parse_listen, accepts_host_port_forms) {
    auto a = parse_listen("127.0.0.1:5672");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->host, "127.0.0.1");
    EXPECT_EQ(a->port, 5672);
    auto b = parse_listen("localhost:0");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->host, "localhost");
    EXPECT_EQ(b->port, 0);
    auto c = parse_listen("[::1]:65535");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->host, "::1");
    EXPECT_EQ(c->port, 65535);
}

TEST(node_config_parse_listen, rejects_malformed_addresses_saying_why) {
    auto expect_bad = [](std::string_view s, std::string_view why) {
        auto r = parse_listen(s);
        ASSERT_FALSE(r) << s;
        EXPECT_NE(r.error().find(why), std::string::npos) << s << ": " << r.error();
    };
    expect_bad("localhost", "expected HOST:PORT");
    expect_bad(":5672", "missing host");
    expect_bad("host:", "missing port");
    expect_bad("host:65536", "out of range 0-65535");
    expect_bad("host:99999999999999999999", "out of range");
    expect_bad("host:-1", "not a number");
    expect_bad("host:12ab", "not a number");
    expect_bad("::1:5672", "brackets");
    expect_bad("[::1:5672", "missing ']'");
    expect_bad("[::1]5672", "expected HOST:PORT");
    expect_bad("[]:5672", "missing host");
    expect_bad("a b:1", "bad character");
}

// ---- --help and --version ---------------------------------------------------

TEST_F(node_config_test, help_lists_every_flag_and_says_the_file_has_the_same_keys) {
    auto err = run_error({"--help"});
    EXPECT_EQ(err.exit_code, 0);
    for (const char* flag :
         {"--config", "--listen", "--data-dir", "--node-id", "--log-level", "--threads", "--busy-poll",
          "--auto-create-queues", "--max-connections", "--max-message-size", "--credit-window",
          "--producer-credit-budget", "--connection-credit-budget", "--max-frame-size", "--idle-timeout", "--help", "--version"})
        EXPECT_NE(err.message.find(flag), std::string::npos) << flag;
    EXPECT_NE(err.message.find("key of the same name"), std::string::npos) << err.message;
}

TEST_F(node_config_test, version_exits_zero) {
    auto err = run_error({"--version"});
    EXPECT_EQ(err.exit_code, 0);
    EXPECT_EQ(err.message.rfind("wharfd ", 0), 0u) << err.message;
}

// ---- errors in the file -----------------------------------------------------

TEST_F(node_config_test, file_unknown_top_level_key_is_an_error_with_a_suggestion) {
    auto err = file_error("node-id = \"x\"\n\nmax-frame-sise = 1024\n", 3,
                          {"unknown key 'max-frame-sise'"});
    EXPECT_NE(err.message.find("did you mean 'max-frame-size'"), std::string::npos);
    file_error("[server]\nport = 1\n", 1, {"unknown key 'server'"});
    file_error("config = \"other.toml\"\n", 1, {"unknown key 'config'"});
}

TEST_F(node_config_test, file_unknown_keys_in_tables_are_errors) {
    file_error("[[listener]]\naddress = \"a:1\"\nidle-timout = 1\n", 3,
               {"unknown key 'idle-timout'", "[[listener]]", "did you mean 'idle-timeout'"});
    file_error("[queue-defaults]\nmax-depth = 1\n", 2, {"unknown key 'max-depth'", "[queue-defaults]"});
    file_error("[queue-defaults]\nname = \"q\"\n", 2, {"unknown key 'name'"});
    file_error("[[queue]]\nname = \"q\"\ndurabel = true\n", 3,
               {"unknown key 'durabel'", "[[queue]] 'q'", "did you mean 'durable'"});
}

TEST_F(node_config_test, file_wrong_types_name_the_key_and_both_types) {
    file_error("threads = \"4\"\n", 1, {"key 'threads'", "expected an integer, got a string"});
    file_error("threads = 4.0\n", 1, {"key 'threads'", "got a floating-point number"});
    file_error("auto-create-queues = \"yes\"\n", 1,
               {"key 'auto-create-queues'", "expected true or false"});
    file_error("node-id = 5\n", 1, {"key 'node-id'", "expected a string, got an integer"});
    file_error("listen = \"127.0.0.1:5672\"\n", 1, {"key 'listen'", "expected an array of strings"});
    file_error("listen = [\"a:1\", 2]\n", 1, {"key 'listen'", "element 2"});
    file_error("idle-timeout = \"5s\"\n", 1, {"key 'idle-timeout'", "expected a number of seconds"});
    file_error("\n[listener]\naddress = \"a:1\"\n", 2, {"key 'listener'", "array of tables"});
    file_error("[[queue-defaults]]\ndurable = true\n", 1, {"key 'queue-defaults'", "expected a table"});
    file_error("[[queue]]\nname = \"q\"\ndurable = 1\n", 3, {"key 'durable'", "expected true or false"});
    file_error("[[queue]]\nname = 7\n", 2, {"key 'name'", "expected a string"});
}

TEST_F(node_config_test, file_out_of_range_numbers_name_the_key) {
    auto err = file_error("\n\n\n\n\n\nmax-frame-size = 100\n", 7, {});
    EXPECT_NE(err.message.find(":7: key 'max-frame-size': 100 is below the AMQP minimum of 512"),
              std::string::npos)
        << err.message;
    file_error("max-connections = -1\n", 1, {"key 'max-connections'", "-1 is negative"});
    file_error("max-connections = 4294967296\n", 1,
               {"key 'max-connections'", "above the maximum of 4294967295"});
    file_error("threads = 5000\n", 1, {"key 'threads'", "above the maximum of 1024"});
    file_error("credit-window = 2147483648\n", 1, {"key 'credit-window'", "above the maximum of 2147483647"});
    file_error("busy-poll = -1\n", 1, {"key 'busy-poll'", "-1 is negative"});
    file_error("busy-poll = 100001\n", 1, {"key 'busy-poll'", "above the maximum of 100000"});
    file_error("busy-poll = \"fast\"\n", 1, {"key 'busy-poll'"});
    file_error("credit-window = 0\n", 1, {"key 'credit-window'", "below the minimum of 1"});
    file_error("connection-credit-budget = -1\n", 1, {"key 'connection-credit-budget'", "-1 is negative"});
    file_error("connection-credit-budget = \"lots\"\n", 1, {"key 'connection-credit-budget'"});
    file_error("max-message-size = -5\n", 1, {"key 'max-message-size'", "negative"});
    file_error("idle-timeout = -0.5\n", 1, {"key 'idle-timeout'", "negative"});
    file_error("idle-timeout = 0.0001\n", 1, {"key 'idle-timeout'", "below 1 ms"});
    file_error("idle-timeout = 0.05\n", 1, {"key 'idle-timeout'", "below 0.2 s"});
    file_error("idle-timeout = 1e10\n", 1, {"key 'idle-timeout'", "above the maximum"});
    file_error("idle-timeout = inf\n", 1, {"key 'idle-timeout'", "finite"});
    file_error("[[listener]]\naddress = \"a:1\"\nmax-frame-size = 511\n", 3,
               {"key 'max-frame-size' in [[listener]]", "AMQP minimum of 512"});
    file_error("[queue-defaults]\nmax-depth-bytes = -1\n", 2,
               {"key 'max-depth-bytes' in [queue-defaults]", "negative"});
    file_error("[[queue]]\nname = \"q\"\nmax-delivery-count = -2\n", 3,
               {"key 'max-delivery-count' in [[queue]] 'q'", "negative"});
}

TEST_F(node_config_test, file_bad_enum_values_list_the_allowed_ones) {
    file_error("log-level = \"loud\"\n", 1,
               {"key 'log-level'", "'loud' is not one of: trace, debug, info, warn, error, off"});
    file_error("[queue-defaults]\noverflow-policy = \"drop-oldest\"\n", 2,
               {"key 'overflow-policy'", "'drop-oldest' is not one of: block, reject"});
    file_error("[[queue]]\nname = \"q\"\nexpiry-policy = \"keep\"\n", 3,
               {"key 'expiry-policy'", "is not one of: drop, dead-letter"});
}

TEST_F(node_config_test, file_bad_addresses_name_the_key) {
    file_error("listen = [\"127.0.0.1:70000\"]\n", 1,
               {"key 'listen'", "'127.0.0.1:70000'", "out of range 0-65535"});
    file_error("[[listener]]\naddress = \"localhost\"\n", 2,
               {"key 'address' in [[listener]]", "expected HOST:PORT"});
    file_error("\n[[listener]]\nmax-frame-size = 1024\n", 2,
               {"[[listener]]", "missing required key 'address'"});
    file_error("listen = [\"a:1\"]\n[[listener]]\naddress = \"a:1\"\n", 2,
               {"listener a:1 is configured twice"});
}

TEST_F(node_config_test, file_queue_names_must_be_present_unique_and_non_empty) {
    auto err = file_error("[[queue]]\nname = \"q\"\n\n[[queue]]\nname = \"q\"\n", 5,
                          {"key 'name'", "duplicate queue name 'q'"});
    EXPECT_NE(err.message.find("first declared at line 2"), std::string::npos) << err.message;
    file_error("[[queue]]\nname = \"\"\n", 2, {"key 'name'", "must not be empty"});
    file_error("\n[[queue]]\ndurable = true\n", 2, {"[[queue]]", "missing required key 'name'"});
    file_error("[queue-defaults]\ndead-letter-queue = \"a\\nb\"\n", 2,
               {"key 'dead-letter-queue'", "control character"});
    file_error("node-id = \"\"\n", 1, {"key 'node-id'", "must not be empty"});
    file_error("[[queue]]\nname = \"" + std::string(65536, 'q') + "\"\n", 2,
               {"key 'name'", "queue name of 65536 bytes is longer than 65535"});
}

TEST_F(node_config_test, a_node_id_is_letters_digits_dash_underscore_and_dot) {
    for (const std::string bad : {"n;1", "n1;mode=x", "a/b", "n 1", "n=1", "n,1", "n\\t1", "n\u00e9"})
        file_error("\n\nnode-id = \"" + bad + "\"\n", 3, {"key 'node-id'", "is not a node id", "letters, digits"});
    flag_error({"--node-id", "n2/x"}, {"--node-id 'n2/x'", "'n2/x' is not a node id"});
    EXPECT_EQ(run_ok({"--node-id", "Node-1_a.b"}).node_id, "Node-1_a.b");
    EXPECT_EQ(run_ok({"--config", write("ok.toml", "node-id = \"n.2\"\n")}).node_id, "n.2");
}

TEST_F(node_config_test, a_queue_cannot_be_its_own_dead_letter_queue) {
    file_error("[[queue]]\nname = \"orders\"\n\ndead-letter-queue = \"orders\"\n", 4,
               {"key 'dead-letter-queue' in [[queue]] 'orders'", "'orders' would dead-letter into itself"});
    // The dead-letter queue itself, inheriting the default, is not refused
    // (the engine drops what it would dead-letter); nor is another name.
    auto cfg = run_ok({"--config", write("ok.toml", "[[queue]]\nname = \"DLQ\"\n[[queue]]\nname = \"a\"\n"
                                                    "dead-letter-queue = \"DLQ\"\n")});
    ASSERT_EQ(cfg.queues.size(), 2u);
}

TEST_F(node_config_test, a_node_must_listen_somewhere) {
    file_error("threads = 1\nlisten = []\n", 2, {"key 'listen'", "no address to listen on"});
    // The listeners of [[listener]] tables are enough.
    auto cfg = run_ok({"--config", write("ok.toml", "listen = []\n[[listener]]\naddress = \"127.0.0.1:0\"\n")});
    ASSERT_EQ(cfg.listeners.size(), 1u);
    EXPECT_EQ(cfg.listeners[0].port, 0);
}

TEST_F(node_config_test, a_plugin_is_listed_once) {
    file_error("plugins = [\"wlm\", \"other\", \"wlm\"]\n", 1, {"key 'plugins'", "'wlm' is listed twice"});
    flag_error({"--plugin", "wlm", "--plugin", "wlm"}, {"--plugin", "'wlm' is listed twice"});
}

TEST_F(node_config_test, file_syntax_error_gives_the_line) {
    file_error("node-id = \"n1\"\nthreads = = 4\n", 2, {"TOML syntax error"});
    file_error("threads = 1\nthreads = 2\n", 2, {"TOML syntax error"}); // redefinition
}

TEST_F(node_config_test, unreadable_config_file_names_the_path_and_the_reason) {
    auto missing = (dir_ / "missing.toml").string();
    auto err = run_error({"--config", missing});
    EXPECT_EQ(err.exit_code, 2);
    EXPECT_NE(err.message.find(missing), std::string::npos) << err.message;
    EXPECT_NE(err.message.find("No such file or directory"), std::string::npos) << err.message;

    err = run_error({"--config", dir_.string()});
    EXPECT_NE(err.message.find("is a directory, not a regular file"), std::string::npos) << err.message;
}

// A device or a FIFO is refused at once: /dev/zero was read until memory
// ran out, and a FIFO with no writer held the start up for good.
TEST_F(node_config_test, a_config_that_is_not_a_regular_file_is_refused_at_once) {
    auto err = run_error({"--config", "/dev/zero"});
    EXPECT_EQ(err.exit_code, 2);
    EXPECT_NE(err.message.find("/dev/zero: is a character device, not a regular file"), std::string::npos)
        << err.message;
    const auto fifo = (dir_ / "config.fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    err = run_error({"--config", fifo});
    EXPECT_NE(err.message.find("is a FIFO or pipe, not a regular file"), std::string::npos) << err.message;
}

TEST_F(node_config_test, parse_toml_messages_use_the_origin) {
    auto r = parse_toml("threads = -1", "inline.toml");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().exit_code, 2);
    EXPECT_EQ(r.error().message, "config inline.toml:1: key 'threads': -1 is negative");
}

// ---- errors in flags --------------------------------------------------------

TEST_F(node_config_test, flag_errors_name_the_flag_and_the_value) {
    flag_error({"--listen", "localhost"}, {"--listen 'localhost': expected HOST:PORT"});
    flag_error({"--listen", "1.2.3.4:65536"}, {"--listen '1.2.3.4:65536'", "out of range"});
    flag_error({"--threads", "abc"}, {"--threads 'abc': expected an integer"});
    flag_error({"--threads=-1"}, {"--threads '-1': -1 is negative"});
    flag_error({"--max-frame-size", "100"},
               {"--max-frame-size '100': 100 is below the AMQP minimum of 512"});
    flag_error({"--max-connections", "99999999999999999999"}, {"--max-connections", "out of range"});
    flag_error({"--log-level", "loud"}, {"--log-level 'loud'", "trace, debug, info, warn, error, off"});
    flag_error({"--auto-create-queues", "yes"}, {"--auto-create-queues 'yes'", "true or false"});
    flag_error({"--idle-timeout", "5s"}, {"--idle-timeout '5s'", "number of seconds"});
    flag_error({"--idle-timeout=-1"}, {"--idle-timeout '-1'", "negative"});
    flag_error({"--busy-poll", "200us"}, {"--busy-poll '200us'"});
    flag_error({"--credit-window", "0"}, {"--credit-window '0'", "minimum of 1"});
    flag_error({"--connection-credit-budget", "many"}, {"--connection-credit-budget 'many'"});
    flag_error({"--node-id", ""}, {"--node-id ''", "must not be empty"});
}

TEST_F(node_config_test, unknown_flags_and_missing_values_are_errors) {
    flag_error({"--max-frame-sise", "1024"}, {"--max-frame-sise"});
    flag_error({"--threads"}, {"--threads"});
    flag_error({"stray"}, {"stray"});
}

TEST_F(node_config_test, a_bad_flag_is_reported_even_with_a_good_file) {
    auto path = write("ok.toml", "threads = 2\n");
    flag_error({"--config", path, "--threads", "x"}, {"--threads 'x'"});
}

} // namespace
} // namespace wharf::config
