#pragma once
// The end-of-run figures and their two renderings (text on stderr, or one
// JSON object on stdout). Built on the main thread after the container stopped.

#include "tools/wharf-bench/histogram.hpp"
#include "tools/wharf-bench/options.hpp"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace wharf::bench {

// Process CPU time (getrusage RUSAGE_SELF), seconds.
struct cpu_times {
    double user = 0;
    double sys = 0;
    static cpu_times now();
};

struct run_totals {
    std::uint64_t sent = 0;
    std::uint64_t settled = 0;
    std::uint64_t accepted = 0;
    std::uint64_t rejected = 0;
    std::uint64_t released = 0;
    std::uint64_t received = 0;
    std::uint64_t foreign = 0;  // pair/latency: messages of other runs, settled and not counted
};

// pair/latency at-most-once: this run's messages that never arrived.
inline std::uint64_t lost_of(const run_totals& t) { return t.sent > t.received ? t.sent - t.received : 0; }

struct run_summary {
    const bench_options* options = nullptr;
    run_totals totals;
    double elapsed_s = 0;          // start of the run to the last message event
    double wall_s = 0;             // start of the run to the decision that it is over
    double setup_s = 0;            // start of the run to the first attach of its last link
    double steady_per_s = -1;      // the mode's rate once every link was attached (-1: not measured)
    cpu_times cpu;                 // used during wall_s
    latency_histogram latency;     // see latency_kind
    std::string latency_kind;      // "accept", "end-to-end" or "" (none measured)
    std::string error;             // empty when the run succeeded

    // The figure the mode is about: sent for send, received otherwise.
    std::uint64_t primary_count() const;
    double rate(std::uint64_t n) const { return elapsed_s > 0 ? static_cast<double>(n) / elapsed_s : 0; }
    double megabytes_per_s() const;
    double cpu_percent() const;  // cpu / wall_s; 100 = one core busy
};

void print_text(std::ostream& out, const run_summary& s);
void print_json(std::ostream& out, const run_summary& s);

// A string as a JSON string literal, quotes included.
std::string json_quote(const std::string& text);

} // namespace wharf::bench
