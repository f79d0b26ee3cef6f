// store-bench: measures the durable-store workload of the broker against
// Wharf's journal_store and against SQLite, RocksDB and LMDB, each with
// equivalent durability (every batch synced before it counts).
//
//   produce          N enqueues in batches of B, one durable commit per batch
//   produce-consume  steady state: each batch enqueues B new messages and
//                    removes the B oldest (queue depth D); N enqueued in all;
//                    the directory's size at the end
//   recovery         store R messages, close; a fresh process opens the
//                    store and reads every live message back in queue order
//
// Each scenario runs --runs times, engines alternating (the order rotates
// every run) after an untimed warm-up; the table shows medians. Every run uses a fresh directory from
// mkdtemp under --tmp, removed afterwards. See docs/storage-engine.md.

#include "tools/store-bench/engines.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace store_bench;
using clock_type = std::chrono::steady_clock;

namespace {

struct config {
    std::vector<std::string> engines;
    std::vector<std::string> scenarios{"produce", "produce-consume", "recovery"};
    int runs = 3;
    uint32_t batch = 250;
    uint64_t messages = 200'000;
    uint64_t depth = 10'000;
    uint64_t recover_messages = 1'000'000;
    uint32_t fill_batch = 250;
    size_t body = 100;
    std::string tmp = "/tmp";
    bool cold = false;
};

double since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string make_dir(const config& c) {
    std::string tmpl = c.tmp + "/store-bench-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
    return tmpl;
}

// Bytes allocated on disk (st_blocks, as du counts them; includes space a
// store preallocates) or, apparent, the files' sizes.
uint64_t dir_bytes(const std::string& dir, bool apparent = false) {
    uint64_t total = 0;
    for (const auto& ent : fs::recursive_directory_iterator(dir)) {
        struct stat st {};
        if (::lstat(ent.path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
            total += apparent ? static_cast<uint64_t>(st.st_size) : static_cast<uint64_t>(st.st_blocks) * 512;
    }
    return total;
}

// Drops the directory's (clean, synced) pages from the page cache.
void evict(const std::string& dir) {
    for (const auto& ent : fs::recursive_directory_iterator(dir)) {
        if (!ent.is_regular_file()) continue;
        int fd = ::open(ent.path().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

struct outcome {
    double value = 0;      // msgs/s, or seconds for recovery
    uint64_t bytes = 0;    // directory size, allocated (produce-consume, recovery: after the fill)
    uint64_t apparent = 0; // the same, file sizes
    uint64_t syncs = 0;
    uint64_t batches = 0;
};

outcome run_produce(const config& c, const std::string& engine_name, const std::string& dir) {
    auto e = open_engine(engine_name, dir, c.body);
    const uint64_t batches = c.messages / c.batch;
    e->prepare(batches * c.batch);
    const auto t0 = clock_type::now();
    for (uint64_t b = 0; b < batches; ++b) e->batch(1 + b * c.batch, c.batch, 0, 0);
    e->drain();
    const double secs = since(t0);
    outcome o{double(batches * c.batch) / secs, dir_bytes(dir), dir_bytes(dir, true), e->syncs(), batches};
    return o;
}

outcome run_produce_consume(const config& c, const std::string& engine_name, const std::string& dir) {
    auto e = open_engine(engine_name, dir, c.body);
    const uint64_t batches = c.messages / c.batch;
    e->prepare(c.depth + batches * c.batch);
    uint64_t next = 1;   // next seq to enqueue
    uint64_t oldest = 1; // oldest live seq
    // Fill to the depth first (not timed).
    while (next - oldest < c.depth) {
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(c.batch, c.depth - (next - oldest)));
        e->batch(next, n, 0, 0);
        next += n;
    }
    e->drain();
    const uint64_t syncs_before = e->syncs();
    const auto t0 = clock_type::now();
    for (uint64_t b = 0; b < batches; ++b) {
        e->batch(next, c.batch, oldest, c.batch);
        next += c.batch;
        oldest += c.batch;
    }
    e->drain();
    const double secs = since(t0);
    // Size at the end of the steady state, the store still open (what the
    // broker's data directory holds while it runs).
    outcome o{double(batches * c.batch) / secs, dir_bytes(dir), dir_bytes(dir, true), e->syncs() - syncs_before,
              batches};
    return o;
}

std::string self_exe() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw std::runtime_error("readlink /proc/self/exe");
    return std::string(buf, static_cast<size_t>(n));
}

outcome run_recovery(const config& c, const std::string& engine_name, const std::string& dir) {
    outcome o;
    {
        auto e = open_engine(engine_name, dir, c.body);
        for (uint64_t s = 1; s <= c.recover_messages; s += c.fill_batch) {
            const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(c.fill_batch, c.recover_messages - s + 1));
            e->batch(s, n, 0, 0);
        }
        e->drain();
    } // closed
    o.bytes = dir_bytes(dir);
    o.apparent = dir_bytes(dir, true);
    if (c.cold) evict(dir);
    // A fresh process, as at broker start.
    const std::string cmd = self_exe() + " --recover-child " + engine_name + " --child-dir " + dir +
                            " --recover-messages " + std::to_string(c.recover_messages) + " --body " +
                            std::to_string(c.body);
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen " + cmd);
    char line[512] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    const int status = ::pclose(p);
    double secs = 0;
    if (!got || status != 0 || std::sscanf(line, "ok %lf", &secs) != 1)
        throw std::runtime_error("recovery child failed: " + std::string(line));
    o.value = secs;
    return o;
}

// The child: recover, time it, then check every message (not timed).
int recover_child(const std::string& engine_name, const std::string& dir, uint64_t expect, size_t body_size) {
    try {
        recovered r = recover(engine_name, dir);
        uint64_t count = 0;
        std::string want(body_size, '\0');
        for (const auto& [q, entries] : r.queues) {
            if (q != queue_name) throw std::runtime_error("unexpected queue " + q);
            for (const auto& e : entries) {
                ++count;
                if (e.seq != count) throw std::runtime_error("seq " + std::to_string(e.seq) + " at position " +
                                                             std::to_string(count));
                make_body(e.seq, want.data(), want.size());
                if (e.body.bytes() != want) throw std::runtime_error("body of seq " + std::to_string(e.seq));
            }
        }
        if (count != expect)
            throw std::runtime_error("recovered " + std::to_string(count) + " of " + std::to_string(expect));
        std::printf("ok %.6f %" PRIu64 "\n", r.seconds, count);
        std::fflush(stdout);
        std::_Exit(0); // skip freeing a million messages
    } catch (const std::exception& ex) {
        std::printf("error %s\n", ex.what());
        return 1;
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string thousands(double v) {
    const std::string digits = std::to_string(static_cast<uint64_t>(v + 0.5));
    std::string s;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
        s += digits[i];
    }
    return s;
}

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

} // namespace

int main(int argc, char** argv) {
    config c;
    c.engines = engine_names();
    std::string child_engine, child_dir;
    CLI::App app{"store-bench: durable-store workload against journal_store, SQLite, RocksDB, LMDB"};
    app.add_option("--engines", c.engines, "engines to run")->delimiter(',');
    app.add_option("--scenarios", c.scenarios, "produce, produce-consume, recovery")->delimiter(',');
    app.add_option("--runs", c.runs, "runs of each scenario (median reported)");
    app.add_option("--batch", c.batch, "messages per durable batch");
    app.add_option("--messages", c.messages, "messages enqueued in produce and produce-consume");
    app.add_option("--depth", c.depth, "queue depth in produce-consume");
    app.add_option("--recover-messages", c.recover_messages, "messages stored before recovery");
    app.add_option("--fill-batch", c.fill_batch, "batch size of the (untimed) recovery fill");
    app.add_option("--body", c.body, "message size in bytes");
    app.add_option("--tmp", c.tmp, "where the mkdtemp directories go");
    app.add_flag("--cold", c.cold, "drop the store's pages from the page cache before recovery (fadvise)");
    app.add_option("--recover-child", child_engine)->group("");
    app.add_option("--child-dir", child_dir)->group("");
    CLI11_PARSE(app, argc, argv);
    if (!child_engine.empty()) return recover_child(child_engine, child_dir, c.recover_messages, c.body);
    if (c.batch == 0 || c.fill_batch == 0 || c.runs < 1) {
        std::fprintf(stderr, "store-bench: --batch, --fill-batch and --runs must be positive\n");
        return 2;
    }

    // Warm-up, not counted: a short produce per engine, so that no engine
    // pays for the process's first heap growth and page faults.
    for (const auto& eng : c.engines) {
        const std::string dir = make_dir(c);
        config w = c;
        w.messages = std::max<uint64_t>(c.batch, c.messages / 10);
        try {
            run_produce(w, eng, dir);
        } catch (const std::exception& ex) {
            std::fprintf(stderr, "store-bench: warm-up / %s: %s\n", eng.c_str(), ex.what());
            fs::remove_all(dir);
            return 1;
        }
        fs::remove_all(dir);
    }

    // results[scenario][engine] = per-run outcomes
    std::map<std::string, std::map<std::string, std::vector<outcome>>> results;
    const auto started = clock_type::now();
    for (const auto& scenario : c.scenarios) {
        for (int run = 0; run < c.runs; ++run) {
            for (size_t i = 0; i < c.engines.size(); ++i) {
                const std::string& eng = c.engines[(i + static_cast<size_t>(run)) % c.engines.size()];
                if (scenario == "recovery" && pipelined_variant(eng)) continue; // same store on disk
                const std::string dir = make_dir(c);
                outcome o;
                try {
                    if (scenario == "produce") o = run_produce(c, eng, dir);
                    else if (scenario == "produce-consume") o = run_produce_consume(c, eng, dir);
                    else if (scenario == "recovery") o = run_recovery(c, eng, dir);
                    else throw std::runtime_error("unknown scenario " + scenario);
                } catch (const std::exception& ex) {
                    std::fprintf(stderr, "store-bench: %s / %s: %s\n", scenario.c_str(), eng.c_str(), ex.what());
                    fs::remove_all(dir);
                    return 1;
                }
                fs::remove_all(dir);
                results[scenario][eng].push_back(o);
                std::fprintf(stderr, "%-16s run %d %-18s %12s %-6s  dir %7.1f MB (apparent %7.1f)  syncs %" PRIu64 "/%" PRIu64 "\n",
                             scenario.c_str(), run + 1, eng.c_str(),
                             scenario == "recovery" ? fixed(o.value, 3).c_str() : thousands(o.value).c_str(),
                             scenario == "recovery" ? "s" : "msg/s", double(o.bytes) / 1e6, double(o.apparent) / 1e6, o.syncs, o.batches);
            }
        }
    }

    // what: 0 value, 1 allocated bytes, 2 apparent bytes
    auto med = [&](const std::string& s, const std::string& e, int what) -> double {
        auto it = results[s].find(e);
        if (it == results[s].end() || it->second.empty()) return -1;
        std::vector<double> v;
        for (const auto& o : it->second)
            v.push_back(what == 1 ? double(o.bytes) : what == 2 ? double(o.apparent) : o.value);
        return median(v);
    };
    // Ratio to the journal as speed: > 1 means faster than the journal.
    auto ratio = [&](const std::string& s, const std::string& e) -> std::string {
        const double j = med(s, "journal", 0), v = med(s, e, 0);
        if (j <= 0 || v <= 0) return "—";
        return fixed(s == "recovery" ? j / v : v / j, 2) + "×";
    };

    std::printf("\nstore-bench: %" PRIu64 " msgs of %zu bytes, batches of %u, depth %" PRIu64
                ", recovery of %" PRIu64 " msgs%s; median of %d runs; %.0f s in all\n\n",
                c.messages, c.body, c.batch, c.depth, c.recover_messages, c.cold ? " (cold cache)" : "", c.runs,
                since(started));
    std::printf("| engine | produce msgs/s | vs journal | produce+consume msgs/s | vs journal | "
                "dir after p+c MB (allocated / apparent) | recovery s | vs journal | dir before recovery MB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& e : c.engines) {
        const double p = med("produce", e, 0), pc = med("produce-consume", e, 0);
        const double pcb = med("produce-consume", e, 1), pca = med("produce-consume", e, 2);
        const double r = med("recovery", e, 0), rb = med("recovery", e, 1);
        std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", e.c_str(),
                    p > 0 ? thousands(p).c_str() : "—", ratio("produce", e).c_str(),
                    pc > 0 ? thousands(pc).c_str() : "—", ratio("produce-consume", e).c_str(),
                    pcb >= 0 ? (fixed(pcb / 1e6, 1) + " / " + fixed(pca / 1e6, 1)).c_str() : "—", r > 0 ? fixed(r, 3).c_str() : "—",
                    ratio("recovery", e).c_str(), rb >= 0 ? fixed(rb / 1e6, 1).c_str() : "—");
    }
    std::printf("\n\"vs journal\" is speed relative to the journal (strict, one batch at a time): > 1 is faster.\n");
    return 0;
}
