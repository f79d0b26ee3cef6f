#pragma once
// Command-line options of wharf-bench, parsed once on the main thread and then
// read (never written) by every thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wharf::bench {

enum class bench_mode { send, receive, pair, latency };

const char* mode_name(bench_mode m);

struct bench_options {
    bench_mode mode = bench_mode::pair;
    std::string url = "127.0.0.1:5672";
    std::string address = "wharf-bench";
    int connections = 1;
    int links = 1;              // per connection (link pairs in pair/latency mode)
    int queues = 1;             // >1: links spread over address-0..address-(queues-1)
    std::size_t size = 100;     // body bytes
    bool at_most_once = false;
    bool durable = false;        // header durable = true on every message
    // Application properties every message carries (string values), and a
    // JMS selector the receivers attach with ("": none).
    std::vector<std::pair<std::string, std::string>> properties;
    std::string selector;
    int credit = 1000;          // receiver credit window
    int in_flight = 1000;       // max unsettled sends per link
    std::optional<std::uint64_t> count;
    std::optional<double> duration;  // seconds
    bool json = false;
    int threads = 1;
    bool quiet = false;
    double timeout = 10;        // seconds without progress before giving up
    double drain_idle = 1;      // receive mode without --count/--duration: quiet time that ends the run
    std::string container_id_prefix;
    // SASL PLAIN with this user and password (empty user: the default, no
    // SASL or ANONYMOUS). Allowed over plain TCP: meant for loopback peers.
    std::string user;
    std::string password;
    // receive mode: accept connections at HOST:PORT instead of connecting
    // to --url; peers attach sending links (the ceiling: sender to receiver,
    // no broker between).
    std::string listen;

    int total_links() const { return connections * links; }
    // The queue that global link number `link_index` uses.
    std::string queue_for(int link_index) const;
    // The share of `total` that link `link_index` (of total_links()) gets.
    std::uint64_t share_of(std::uint64_t total, int link_index) const;
    // True when the run needs a send timestamp in each message.
    bool listening() const { return !listen.empty(); }
    bool end_to_end() const { return mode == bench_mode::pair || mode == bench_mode::latency; }
};

// Parses argv. Returns the options, or the process exit code when the run must
// not start (0 after --help, 2 after bad flags; the message is already printed).
struct parse_result {
    std::optional<bench_options> options;
    int exit_code = 0;
};
parse_result parse_options(int argc, char** argv);

} // namespace wharf::bench
