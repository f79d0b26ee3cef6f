#include "tools/wharf-bench/stats.hpp"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <cstdio>
#include <ostream>

namespace wharf::bench {

namespace {

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

double micros(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

} // namespace

cpu_times cpu_times::now() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return {seconds(ru.ru_utime), seconds(ru.ru_stime)};
}

std::uint64_t run_summary::primary_count() const {
    return options->mode == bench_mode::send ? totals.sent : totals.received;
}

double run_summary::megabytes_per_s() const {
    return rate(primary_count()) * static_cast<double>(options->size) / 1e6;
}

double run_summary::cpu_percent() const {
    return wall_s > 0 ? 100.0 * (cpu.user + cpu.sys) / wall_s : 0;
}

void print_text(std::ostream& out, const run_summary& s) {
    const auto& o = *s.options;
    out << "wharf-bench " << mode_name(o.mode) << ": " << o.connections << " connection(s) x " << o.links
        << " link(s), " << o.queues << " queue(s), " << o.size << " B, "
        << (o.at_most_once ? "at-most-once" : "at-least-once") << ", " << o.threads << " thread(s)\n";
    out << "  sent        " << s.totals.sent << "  (" << fixed(s.rate(s.totals.sent), 0) << " msgs/s)\n";
    if (!o.at_most_once && o.mode != bench_mode::receive)
        out << "  accepted    " << s.totals.accepted << "  rejected " << s.totals.rejected << "  released "
            << s.totals.released << "\n";
    out << "  received    " << s.totals.received << "  (" << fixed(s.rate(s.totals.received), 0)
        << " msgs/s)\n";
    if (o.at_most_once && o.end_to_end())
        out << "  lost        " << lost_of(s.totals) << "  (sent pre-settled, never arrived)\n";
    if (s.totals.foreign > 0)
        out << "  foreign     " << s.totals.foreign
            << "  (already on the queue, not of this run: settled, not counted)\n";
    out << "  throughput  " << fixed(s.rate(s.primary_count()), 0) << " msgs/s, "
        << fixed(s.megabytes_per_s(), 2) << " MB/s (body bytes)\n";
    if (!s.latency_kind.empty() && s.latency.count() > 0) {
        out << "  latency     " << s.latency_kind << " (us): p50 " << fixed(micros(s.latency.percentile(50)), 1)
            << "  p90 " << fixed(micros(s.latency.percentile(90)), 1) << "  p99 "
            << fixed(micros(s.latency.percentile(99)), 1) << "  max " << fixed(micros(s.latency.max()), 1)
            << "  (" << s.latency.count() << " samples)\n";
    }
    out << "  elapsed     " << fixed(s.elapsed_s, 3) << " s\n";
    out << "  cpu         " << fixed(s.cpu.user + s.cpu.sys, 3) << " s (user " << fixed(s.cpu.user, 3)
        << ", sys " << fixed(s.cpu.sys, 3) << "), " << fixed(s.cpu_percent(), 1) << " % of one core over "
        << fixed(s.wall_s, 3) << " s wall\n";
    if (!s.error.empty()) out << "  error       " << s.error << "\n";
}

std::string json_quote(const std::string& text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_json(std::ostream& out, const run_summary& s) {
    const auto& o = *s.options;
    const auto& h = s.latency;
    out << "{\"mode\":" << json_quote(mode_name(o.mode)) << ",\"url\":" << json_quote(o.url)
        << ",\"address\":" << json_quote(o.address) << ",\"connections\":" << o.connections
        << ",\"links\":" << o.links << ",\"queues\":" << o.queues << ",\"size\":" << o.size
        << ",\"delivery\":" << json_quote(o.at_most_once ? "at-most-once" : "at-least-once")
        << ",\"durable\":" << (o.durable ? "true" : "false")
        << ",\"credit\":" << o.credit << ",\"in_flight\":" << o.in_flight << ",\"threads\":" << o.threads
        << ",\"sent\":" << s.totals.sent << ",\"accepted\":" << s.totals.accepted
        << ",\"rejected\":" << s.totals.rejected << ",\"released\":" << s.totals.released
        << ",\"received\":" << s.totals.received << ",\"foreign\":" << s.totals.foreign << ",\"lost\":"
        << (o.at_most_once && o.end_to_end() ? std::to_string(lost_of(s.totals)) : std::string("null"))
        << ",\"elapsed_s\":" << fixed(s.elapsed_s, 6)
        << ",\"setup_s\":" << fixed(s.setup_s, 6)
        << ",\"steady_per_s\":" << (s.steady_per_s < 0 ? std::string("null") : fixed(s.steady_per_s, 1))
        << ",\"sent_per_s\":" << fixed(s.rate(s.totals.sent), 1)
        << ",\"received_per_s\":" << fixed(s.rate(s.totals.received), 1)
        << ",\"msgs_per_s\":" << fixed(s.rate(s.primary_count()), 1)
        << ",\"mb_per_s\":" << fixed(s.megabytes_per_s(), 3) << ",\"latency\":";
    if (s.latency_kind.empty() || h.count() == 0) {
        out << "null";
    } else {
        out << "{\"kind\":" << json_quote(s.latency_kind) << ",\"samples\":" << h.count()
            << ",\"p50_us\":" << fixed(micros(h.percentile(50)), 1)
            << ",\"p90_us\":" << fixed(micros(h.percentile(90)), 1)
            << ",\"p99_us\":" << fixed(micros(h.percentile(99)), 1) << ",\"max_us\":" << fixed(micros(h.max()), 1)
            << ",\"mean_us\":" << fixed(h.mean() / 1000.0, 1) << "}";
    }
    out << ",\"cpu_user_s\":" << fixed(s.cpu.user, 3) << ",\"cpu_sys_s\":" << fixed(s.cpu.sys, 3)
        << ",\"cpu_s\":" << fixed(s.cpu.user + s.cpu.sys, 3) << ",\"wall_s\":" << fixed(s.wall_s, 6) << ",\"cpu_percent\":" << fixed(s.cpu_percent(), 1)
        << ",\"ok\":" << (s.error.empty() ? "true" : "false")
        << ",\"error\":" << (s.error.empty() ? std::string("null") : json_quote(s.error)) << "}\n";
}

} // namespace wharf::bench
