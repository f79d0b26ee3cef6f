#include "tools/wharf-bench/monitor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace wharf::bench {

namespace {

constexpr std::uint64_t ns_per_s = 1'000'000'000;

std::uint64_t to_ns(double seconds) { return static_cast<std::uint64_t>(seconds * 1e9); }

std::uint64_t progress_sum(const run_totals& t) { return t.sent + t.settled + t.received + t.foreign; }

} // namespace

bench_monitor::bench_monitor(run_control& run, bench_clients& clients, std::uint64_t start_ns)
    : run_(run), clients_(clients), options_(run.options()), start_ns_(start_ns), last_line_ns_(start_ns) {
    for (auto& conn : clients_.connections()) {
        senders_ += static_cast<int>(conn->senders().size());
        receivers_ += static_cast<int>(conn->receivers().size());
    }
}

// O(threads), not O(links): links count into run_control as they go.
// The counts first (acquire), the totals after: a sender counts its last
// message before it reports that it is done, so a snapshot that sees every
// sender done also sees every message they counted.
bench_monitor::snapshot bench_monitor::take() const {
    snapshot s;
    s.senders_finished = run_.senders_finished() >= senders_;
    s.senders_attached = run_.senders_attached() >= senders_;
    s.receivers_attached = run_.receivers_attached() >= receivers_;
    s.last_attach_ns = run_.last_attach_ns();
    s.totals = run_.totals();
    s.last_progress_ns = run_.last_progress_ns();
    return s;
}

run_totals bench_monitor::totals() const { return take().totals; }

std::uint64_t bench_monitor::last_progress_ns() const { return take().last_progress_ns; }

std::uint64_t bench_monitor::last_attach_ns() const { return take().last_attach_ns; }

bool bench_monitor::over(const snapshot& s, std::uint64_t now) const {
    const auto& t = s.totals;
    // Nothing has happened for --drain-idle (counting from the last attach when
    // no message came yet).
    // A link's thread may stamp an event after `now` was read (take() runs
    // later): that is no quiet at all, not a wrapped-around huge one.
    const std::uint64_t last_event = std::max(s.last_progress_ns, s.last_attach_ns);
    const bool quiet_long = last_event != 0 && now > last_event && now - last_event >= to_ns(options_.drain_idle);
    switch (options_.mode) {
    case bench_mode::send:
        return s.senders_finished;
    case bench_mode::receive:
        // --listen: the senders came and went (at-most-once may lose some).
        if (auto* l = clients_.listener(); l != nullptr && l->peers_gone()) return true;
        if (options_.count) return t.received >= *options_.count;
        if (options_.duration) return run_.stop_sending();
        return s.receivers_attached && quiet_long;  // drained what was there
    case bench_mode::pair:
    case bench_mode::latency:
    {
        // Every accepted message must arrive (a rejected or released one never
        // will). At-most-once may lose messages: stop once nothing arrives any more.
        const std::uint64_t expected = options_.at_most_once ? t.sent : t.accepted;
        return s.senders_finished && (t.received >= expected || (options_.at_most_once && quiet_long));
    }
    }
    return false;
}

void bench_monitor::progress_line(const snapshot& s, std::uint64_t now) {
    if (now - last_line_ns_ < ns_per_s) return;
    const double dt = static_cast<double>(now - last_line_ns_) / 1e9;
    const auto second = (now - start_ns_) / ns_per_s;
    const auto& t = s.totals;
    if (!options_.quiet && second >= 2) {
        std::fprintf(stderr, "wharf-bench [%3llus] sent %llu (%.0f msgs/s), received %llu (%.0f msgs/s)\n",
                     static_cast<unsigned long long>(second), static_cast<unsigned long long>(t.sent),
                     static_cast<double>(t.sent - last_line_totals_.sent) / dt,
                     static_cast<unsigned long long>(t.received),
                     static_cast<double>(t.received - last_line_totals_.received) / dt);
    }
    last_line_ns_ = now;
    last_line_totals_ = t;
}

void bench_monitor::watch(const std::atomic<bool>& container_done) {
    std::uint64_t last_sum = 0;
    std::uint64_t last_change = start_ns_;
    while (!run_.failed() && !container_done.load(std::memory_order_acquire)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const std::uint64_t now = now_ns();
        if (options_.duration && !run_.stop_sending() && now - start_ns_ >= to_ns(*options_.duration)) {
            run_.set_stop_sending();
            clients_.poke_all_senders();  // idle senders must notice they are done
        }
        const snapshot s = take();
        if (all_attached_ns_ == 0 && s.senders_attached && s.receivers_attached) {
            all_attached_ns_ = now;
            count_at_all_attached_ = options_.mode == bench_mode::send ? s.totals.sent : s.totals.received;
        }
        if (over(s, now)) return;
        progress_line(s, now);
        if (const auto sum = progress_sum(s.totals); sum != last_sum) {
            last_sum = sum;
            last_change = now;
        } else if (now - last_change >= to_ns(options_.timeout)) {
            char text[160];
            std::snprintf(text, sizeof text, "timeout: no progress for %.1f s (sent %llu, settled %llu, received %llu)",
                          options_.timeout, static_cast<unsigned long long>(s.totals.sent),
                          static_cast<unsigned long long>(s.totals.settled),
                          static_cast<unsigned long long>(s.totals.received));
            run_.fail(text);
            return;
        }
    }
}

} // namespace wharf::bench
