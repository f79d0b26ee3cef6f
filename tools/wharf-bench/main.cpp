// wharf-bench: AMQP 1.0 load generator on Proton C++. See README.md.
//
// Threads: the container runs on --threads threads (each connection's events
// on one of them at a time); the main thread runs bench_monitor and, at the
// end, renders the summary.

#include "tools/wharf-bench/connection_client.hpp"
#include "tools/wharf-bench/monitor.hpp"
#include "tools/wharf-bench/options.hpp"
#include "tools/wharf-bench/run_control.hpp"
#include "tools/wharf-bench/stats.hpp"

#include <proton/container.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <iostream>
#include <thread>

using namespace wharf::bench;

namespace {

constexpr auto close_grace = std::chrono::seconds(3);

void wait_for(const std::atomic<bool>& flag, std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!flag.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

} // namespace

int main(int argc, char** argv) {
    const parse_result parsed = parse_options(argc, argv);
    if (!parsed.options) return parsed.exit_code;
    const bench_options& options = *parsed.options;

    run_control run(options);
    bench_clients clients(run);
    proton::container container(clients, options.container_id_prefix);

    const cpu_times cpu_start = cpu_times::now();
    const std::uint64_t start = now_ns();
    std::atomic<bool> container_done{false};
    std::thread runner([&] {
        try {
            container.run(options.threads);
        } catch (const std::exception& e) {
            run.fail(std::string("container: ") + e.what());
        }
        container_done.store(true, std::memory_order_release);
    });

    bench_monitor monitor(run, clients, start);
    monitor.watch(container_done);
    if (container_done.load() && !run.failed()) run.fail("the container stopped before the run was over");
    const std::uint64_t stopped_at = now_ns();
    const cpu_times cpu_end = cpu_times::now();

    run.set_stop_sending();
    if (auto* l = clients.listener()) {
        // Let the senders settle and close first (up to --timeout: a peer
        // with thousands of links takes a while): closing under them would
        // fail their run.
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(options.timeout));
        while (!l->peers_gone() && !run.failed() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (clients.request_close_all() > 0) wait_for(container_done, close_grace);
    if (!container_done.load()) container.stop();  // a connection that never opened, or a peer that does not answer
    runner.join();

    run_summary summary;
    summary.options = &options;
    summary.totals = monitor.totals();
    const std::uint64_t last = monitor.last_progress_ns();
    const std::uint64_t end = (!run.failed() && last > start) ? last : stopped_at;
    // A listening run starts when the first peer attaches, not when it starts waiting.
    const std::uint64_t first = options.listening() ? clients.first_attach_ns() : 0;
    const std::uint64_t begin = (first != 0 && first < end) ? first : start;
    summary.elapsed_s = static_cast<double>(end - begin) / 1e9;
    if (const std::uint64_t attached = monitor.last_attach_ns(); attached > begin && attached <= end)
        summary.setup_s = static_cast<double>(attached - begin) / 1e9;
    // What moved after the monitor saw every link attached, per second until the end.
    if (const std::uint64_t all = monitor.all_attached_ns(); all != 0 && end > all && !run.failed())
        summary.steady_per_s = static_cast<double>(summary.primary_count() - monitor.count_at_all_attached()) /
                               (static_cast<double>(end - all) / 1e9);
    summary.wall_s = static_cast<double>(stopped_at - start) / 1e9;
    summary.cpu = {cpu_end.user - cpu_start.user, cpu_end.sys - cpu_start.sys};
    summary.error = run.error();
    if (options.end_to_end()) {
        summary.latency = run.e2e_latency().merged();
        summary.latency_kind = "end-to-end";
    } else if (options.mode == bench_mode::send && !options.at_most_once) {
        summary.latency = run.accept_latency().merged();
        summary.latency_kind = "accept";
    }

    if (!summary.error.empty()) std::cerr << "wharf-bench: " << summary.error << "\n";
    if (options.json) print_json(std::cout, summary);
    else print_text(std::cout, summary);
    return summary.error.empty() ? 0 : 1;
}
