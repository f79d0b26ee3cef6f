#pragma once
// bench_monitor: runs on the main thread while the container runs on its own
// threads. Every 10 ms it sums the link counters, decides when the run is over
// (count reached, duration over, queue drained, error, or no progress for
// --timeout), prints the per-second progress line, and asks the connections
// to close. It only reads run_control's counters and posts work to connections.

#include "tools/wharf-bench/connection_client.hpp"
#include "tools/wharf-bench/run_control.hpp"
#include "tools/wharf-bench/stats.hpp"

#include <atomic>
#include <cstdint>

namespace wharf::bench {

class bench_monitor {
public:
    bench_monitor(run_control& run, bench_clients& clients, std::uint64_t start_ns);

    // Returns when the run is over (or failed) or the container has stopped.
    void watch(const std::atomic<bool>& container_done);

    // Counters summed over every link. Safe while the container runs.
    run_totals totals() const;
    // The latest message event of any link (0 if none).
    std::uint64_t last_progress_ns() const;
    // The latest first attach of any link (0 if none).
    std::uint64_t last_attach_ns() const;
    // When the monitor first saw every link attached (0: never), and the
    // mode's count (sent for send, received otherwise) at that moment.
    std::uint64_t all_attached_ns() const { return all_attached_ns_; }
    std::uint64_t count_at_all_attached() const { return count_at_all_attached_; }

private:
    struct snapshot {
        run_totals totals;
        std::uint64_t last_progress_ns = 0;
        bool senders_finished = true;
        bool receivers_attached = true;
        bool senders_attached = true;
        std::uint64_t last_attach_ns = 0;  // senders' and receivers'
    };
    snapshot take() const;
    bool over(const snapshot& s, std::uint64_t now) const;
    void progress_line(const snapshot& s, std::uint64_t now);

    run_control& run_;
    bench_clients& clients_;
    const bench_options& options_;
    const std::uint64_t start_ns_;
    std::uint64_t last_line_ns_;
    run_totals last_line_totals_;
    std::uint64_t all_attached_ns_ = 0;
    std::uint64_t count_at_all_attached_ = 0;
    int senders_ = 0;    // links of the run
    int receivers_ = 0;
};

} // namespace wharf::bench
