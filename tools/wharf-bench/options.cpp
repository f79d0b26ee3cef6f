#include "tools/wharf-bench/options.hpp"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>
#include <map>

namespace wharf::bench {

const char* mode_name(bench_mode m) {
    switch (m) {
    case bench_mode::send: return "send";
    case bench_mode::receive: return "receive";
    case bench_mode::pair: return "pair";
    case bench_mode::latency: return "latency";
    }
    return "?";
}

std::string bench_options::queue_for(int link_index) const {
    if (queues <= 1) return address;
    return address + "-" + std::to_string(link_index % queues);
}

std::uint64_t bench_options::share_of(std::uint64_t total, int link_index) const {
    const auto n = static_cast<std::uint64_t>(total_links());
    const auto i = static_cast<std::uint64_t>(link_index);
    return total / n + (i < total % n ? 1 : 0);
}

namespace {

// Cross-option checks CLI11 cannot express; returns an error text or "".
std::string validate(const bench_options& o) {
    if (o.end_to_end() && o.size < 8)
        return std::string("--size must be at least 8 in ") + mode_name(o.mode) +
               " mode (the send timestamp is the body's first 8 bytes)";
    if (o.count && *o.count == 0) return "--count must be at least 1";
    if (o.duration && *o.duration <= 0) return "--duration must be positive";
    if (o.timeout <= 0) return "--timeout must be positive";
    if (o.mode == bench_mode::latency && o.count &&
        *o.count < static_cast<std::uint64_t>(o.total_links()))
        return "--count in latency mode must be at least --connections x --links";
    if (!o.password.empty() && o.user.empty()) return "--password needs --user";
    if (o.listening() && o.mode != bench_mode::receive) return "--listen works in receive mode only";
    return "";
}

} // namespace

parse_result parse_options(int argc, char** argv) {
    bench_options o;
    CLI::App app{"wharf-bench: AMQP 1.0 load generator (send, receive, pair, latency)"};
    app.get_formatter()->column_width(34);

    const std::map<std::string, bench_mode> modes{{"send", bench_mode::send},
                                                  {"receive", bench_mode::receive},
                                                  {"pair", bench_mode::pair},
                                                  {"latency", bench_mode::latency}};
    std::string mode = "pair";
    app.add_option("mode", mode, "send | receive | pair | latency")
        ->required()
        ->check(CLI::IsMember({"send", "receive", "pair", "latency"}));
    app.add_option("--url", o.url, "Broker HOST:PORT (or amqp://HOST:PORT)")->capture_default_str();
    app.add_option("--address", o.address, "Queue name (NAME-0..NAME-k with --queues > 1)")
        ->capture_default_str();
    app.add_option("--connections", o.connections, "Connections")->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app.add_option("--links", o.links, "Links per connection (link pairs in pair/latency mode)")
        ->check(CLI::Range(1, 100000))->capture_default_str();
    app.add_option("--queues", o.queues, "Spread links over this many queues")
        ->check(CLI::Range(1, 100000))->capture_default_str();
    app.add_option("--size", o.size, "Body size in bytes")->check(CLI::Range(0, 64 << 20))
        ->capture_default_str();
    app.add_flag("--at-most-once", o.at_most_once, "Send pre-settled (default: at-least-once)");
    app.add_flag("--durable", o.durable, "Mark messages durable (the broker must store them before accepting)");
    std::vector<std::string> properties;
    app.add_option("--property", properties,
                   "NAME=VALUE: an application property (a string) on every message; repeatable");
    app.add_option("--selector", o.selector,
                   "Receivers attach with this JMS selector (filter 'jms-selector', as Qpid JMS and rhea send it)");
    app.add_option("--credit", o.credit, "Receiver credit window (refilled when half is used)")
        ->check(CLI::Range(1, 1 << 24))->capture_default_str();
    app.add_option("--in-flight", o.in_flight, "Max unsettled sends per link")
        ->check(CLI::Range(1, 1 << 24))->capture_default_str();
    app.add_option("--count", o.count, "Total messages (receive: stop after N received)");
    app.add_option("--duration", o.duration, "Run for SECONDS (default 10 s when no --count)");
    app.add_flag("--json", o.json, "Print one JSON object on stdout at the end");
    app.add_option("--threads", o.threads, "Container threads")->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_flag("--quiet", o.quiet, "No progress lines");
    app.add_option("--timeout", o.timeout, "Exit 1 after SECONDS without progress")
        ->capture_default_str();
    app.add_option("--drain-idle", o.drain_idle,
                   "receive without --count/--duration: stop after SECONDS with no message")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--container-id-prefix", o.container_id_prefix,
                   "Container id prefix; connection i uses PREFIX-i (default wharf-bench-PID)");
    app.add_option("--user", o.user, "SASL PLAIN user (also over plain TCP)");
    app.add_option("--password", o.password, "SASL PLAIN password (with --user)");
    app.add_option("--listen", o.listen,
                   "receive: listen at HOST:PORT and take what connecting senders send (no broker)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return {std::nullopt, app.exit(e)};
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return {std::nullopt, 2};
    }
    o.mode = modes.at(mode);
    for (const auto& p : properties) {
        const auto eq = p.find('=');
        if (eq == std::string::npos || eq == 0) {
            std::cerr << "wharf-bench: --property '" << p << "' is not NAME=VALUE\n";
            return {std::nullopt, 2};
        }
        o.properties.emplace_back(p.substr(0, eq), p.substr(eq + 1));
    }
    if (auto err = validate(o); !err.empty()) {
        std::cerr << "wharf-bench: " << err << "\n";
        return {std::nullopt, 2};
    }
    if (!o.count && !o.duration && o.mode != bench_mode::receive) o.duration = 10.0;
    if (o.container_id_prefix.empty()) o.container_id_prefix = "wharf-bench-" + std::to_string(::getpid());
    return {o, 0};
}

} // namespace wharf::bench
