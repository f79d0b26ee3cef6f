// sqlite_metadata_store shared by several connections and processes: the
// cases the file is for.

#include "wlm/metadata/tests/store_fixture.hpp"

#include <climits>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

namespace wharf::wlm {
namespace {

using namespace std::chrono_literals;

// N processes, each with its own connection, try to create the same key at
// the same moment: exactly one wins and all agree on the winner.
TEST_F(sqlite_metadata_store_test, cross_process_compare_and_set_race_has_one_winner) {
    constexpr int n = 4;
    struct report_t {
        char outcome; // 'W' won, 'C' conflict, 'E' error
        char winner[400];
    };
    static_assert(sizeof(report_t) < PIPE_BUF);
    int ready[2], go[2], report[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(report), 0);

    std::vector<pid_t> children;
    for (int k = 0; k < n; ++k) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0) << std::strerror(errno);
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            close(report[0]);
            report_t out{};
            out.outcome = 'E';
            // Every child opens the (possibly not yet created) file itself.
            auto store = sqlite_metadata_store::open(path_);
            char c = 'r';
            (void)!write(ready[1], &c, 1);
            (void)!read(go[0], &c, 1); // returns at EOF: the parent closed `go`
            if (store) {
                auto r = (*store)->compare_and_set("owner/q", 0, "child" + std::to_string(k));
                out.outcome = r ? 'W' : (r.error().code == store_errc::conflict ? 'C' : 'E');
                auto got = (*store)->get("owner/q");
                if (got && got->has_value())
                    std::snprintf(out.winner, sizeof out.winner, "%s", (*got)->value.c_str());
                if (!r && out.outcome == 'E')
                    std::snprintf(out.winner, sizeof out.winner, "%s", r.error().description.c_str());
            } else {
                std::snprintf(out.winner, sizeof out.winner, "%s", store.error().description.c_str());
            }
            (void)!write(report[1], &out, sizeof out);
            _exit(0);
        }
        children.push_back(pid);
    }
    close(ready[1]);
    close(go[0]);
    close(report[1]);

    for (int k = 0; k < n; ++k) {
        char c;
        ASSERT_EQ(read(ready[0], &c, 1), 1) << "child " << k << " did not get ready";
    }
    close(go[1]); // every child's read() returns now

    std::vector<report_t> reports;
    report_t r;
    while (read(report[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r))
        reports.push_back(r);
    for (pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    close(ready[0]);
    close(report[0]);

    ASSERT_EQ(reports.size(), static_cast<size_t>(n));
    int wins = 0, conflicts = 0;
    std::set<std::string> winners;
    for (const auto& rep : reports) {
        wins += rep.outcome == 'W';
        conflicts += rep.outcome == 'C';
        winners.insert(rep.winner);
        EXPECT_NE(rep.outcome, 'E') << rep.winner;
    }
    EXPECT_EQ(wins, 1);
    EXPECT_EQ(conflicts, n - 1);
    ASSERT_EQ(winners.size(), 1u);

    auto s = open_store();
    auto got = *s->get("owner/q");
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, *winners.begin());
    EXPECT_EQ(*s->revision(), 1u);
}

// N processes increment one counter with get + compare_and_set, retrying on
// conflict: no increment is lost and no process sees an error.
TEST_F(sqlite_metadata_store_test, cross_process_increments_are_not_lost) {
    constexpr int n = 4;
    constexpr int per_child = 50;
    { ASSERT_NE(open_store(), nullptr); }
    std::vector<pid_t> children;
    for (int k = 0; k < n; ++k) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0) << std::strerror(errno);
        if (pid == 0) {
            auto store = sqlite_metadata_store::open(path_);
            if (!store)
                _exit(2);
            for (int i = 0; i < per_child;) {
                auto got = (*store)->get("counter");
                if (!got)
                    _exit(3);
                uint64_t version = got->has_value() ? (*got)->version : 0;
                int value = got->has_value() ? std::stoi((*got)->value) : 0;
                auto r = (*store)->compare_and_set("counter", version, std::to_string(value + 1));
                if (r)
                    ++i;
                else if (r.error().code != store_errc::conflict)
                    _exit(4);
            }
            _exit(0);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }
    auto s = open_store();
    auto got = *s->get("counter");
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, std::to_string(n * per_child));
    EXPECT_EQ(*s->revision(), static_cast<uint64_t>(n * per_child));
}

TEST_F(sqlite_metadata_store_test, write_waiting_beyond_busy_timeout_is_unavailable) {
    auto o = options();
    o.busy_timeout = 50ms;
    auto s = open_store(o);
    ASSERT_TRUE(s->compare_and_set("k", 0, "v"));

    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);

    auto r = s->compare_and_set("k2", 0, "v");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, store_errc::unavailable);
    EXPECT_NE(r.error().description.find(path_), std::string::npos) << r.error().description;
    // WAL: readers are not blocked by a writer.
    EXPECT_TRUE(s->get("k"));

    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    EXPECT_TRUE(s->compare_and_set("k2", 0, "v"));
}

} // namespace
} // namespace wharf::wlm
