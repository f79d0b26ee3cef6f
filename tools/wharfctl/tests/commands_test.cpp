// The commands against a scripted node: what they ask and what they print.
#include "tools/wharfctl/commands.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <regex>
#include <sstream>

namespace wharf::ctl {

namespace {

datum text(const char* s) { return datum{std::string(s)}; }
datum num(int64_t n) { return datum{n}; }

datum query_body(std::vector<std::string> names, std::vector<datum::list> rows) {
    datum::list n, r;
    for (auto& x : names) n.push_back(datum{x});
    for (auto& x : rows) r.push_back(datum{x});
    return datum{datum::map{{"attributeNames", datum{n}}, {"results", datum{r}}}};
}

std::string prop(const mgmt_request& r, const std::string& key) {
    for (const auto& [k, v] : r.properties)
        if (k == key) return proton::get<std::string>(v);
    return "";
}

// Answers requests in order from a script; records what was asked.
struct fake_node {
    std::deque<mgmt_reply> answers;
    std::vector<std::string> asked; // "OPERATION TYPE NAME entityType"
    mgmt_reply operator()(const mgmt_request& r) {
        asked.push_back(prop(r, "operation") + " " + prop(r, "type") + " " + prop(r, "name") + " " +
                        prop(r, "entityType"));
        mgmt_reply out = answers.front();
        answers.pop_front();
        return out;
    }
};

} // namespace

TEST(wharfctl_commands, status_of_a_single_node_shows_its_queues_without_temporary_ones) {
    fake_node node;
    node.answers = {{404, "unknown entity type 'wharf.node'", {}, {}},
                    {200, "OK", 2,
                     query_body({"name", "depth", "temporary"},
                                {{text("orders"), num(5), datum{false}}, {text("$dynamic.py.1"), num(0), datum{true}}})}};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "py (127.0.0.1:5672)", false, out);
    c.status();
    EXPECT_EQ(node.asked.at(0), "QUERY org.amqp.management  wharf.node");
    EXPECT_NE(out.str().find("single node"), std::string::npos);
    EXPECT_NE(out.str().find("QUEUE   DEPTH  BYTES  CONSUMERS  ENQUEUED  DELIVERED\norders  5      -"), std::string::npos)
        << out.str();
    EXPECT_EQ(out.str().find("$dynamic"), std::string::npos);
}

TEST(wharfctl_commands, status_rates_come_from_two_readings_a_window_apart) {
    fake_node node;
    auto reading = [](int64_t enqueued, int64_t acknowledged) {
        return mgmt_reply{200, "OK", 1,
                          query_body({"name", "depth", "enqueued", "acknowledged"},
                                     {{text("orders"), num(5), num(enqueued), num(acknowledged)}})};
    };
    node.answers = {{404, "unknown entity type 'wharf.node'", {}, {}}, reading(10, 0), reading(30, 5)};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "py (127.0.0.1:5672)", false, out);
    c.status(std::chrono::milliseconds(50)); // 20 in, 5 out in at least 0.05 s, as measured
    EXPECT_NE(out.str().find("IN/S  OUT/S"), std::string::npos) << out.str();
    // The rates divide by the time that really passed between the readings:
    // at most 400 and 100 per second, in the ratio 4 : 1.
    std::smatch m;
    const std::string text = out.str();
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(orders .* (\d+) +(\d+)\n)"))) << text;
    const int in = std::stoi(m[1]), out_rate = std::stoi(m[2]);
    EXPECT_LE(in, 400) << text;
    EXPECT_GT(in, 0) << text;
    EXPECT_LE(out_rate, 100) << text;
    EXPECT_NEAR(in, 4 * out_rate, 4) << text;
}

TEST(wharfctl_commands, status_of_a_cluster_joins_owners_with_local_depth) {
    fake_node node;
    node.answers = {
        {200, "OK", 2,
         query_body({"name", "host", "port", "state", "queues", "messages", "connections"},
                    {{text("n1"), text("127.0.0.1"), num(5672), text("active"), num(1), num(5), num(2)},
                     {text("n2"), text("127.0.0.1"), num(5673), text("draining"), num(1), num(0), num(0)}})},
        {200, "OK", 2,
         query_body({"name", "node", "nodeState", "state", "to"},
                    {{text("a"), text("n1"), text("live"), text("active"), datum{}},
                     {text("b"), text("n2"), text("live"), text("moving"), text("n1")},
                     {text("c"), text("n9"), text("down"), text("active"), datum{}}})},
        {200, "OK", 1, query_body({"name", "depth"}, {{text("a"), num(5)}})}};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1 (127.0.0.1:5672)", false, out);
    c.status();
    const std::string s = out.str();
    EXPECT_NE(s.find("cluster of 3 nodes"), std::string::npos) << s;
    EXPECT_NE(s.find("n9    -               down      -       -         -\n"), std::string::npos) << s;
    EXPECT_NE(s.find("c      n9     owner down    -\n"), std::string::npos) << s;
    EXPECT_NE(s.find("n2    127.0.0.1:5673  draining  1       0         0\n"), std::string::npos) << s;
    EXPECT_NE(s.find("a      n1     active        5\n"), std::string::npos) << s;
    EXPECT_NE(s.find("b      n2     moving to n1  -\n"), std::string::npos) << s;
}

TEST(wharfctl_commands, an_error_status_is_thrown_with_its_code) {
    fake_node node;
    node.answers = {{404, "no wharf.queue named 'x'", {}, {}}};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1", false, out);
    try {
        c.read("queue", "x");
        FAIL();
    } catch (const status_error& e) {
        EXPECT_EQ(std::string(e.what()), "404 no wharf.queue named 'x'");
    }
}

TEST(wharfctl_commands, move_waits_until_active_on_the_target) {
    fake_node node;
    auto owner = [](const char* at, const char* state) {
        return mgmt_reply{200, "OK", {}, datum{datum::map{{"name", text("q")}, {"node", text(at)},
                                                           {"state", text(state)}, {"epoch", num(4)}}}};
    };
    node.answers = {owner("n1", "moving"), owner("n1", "moving"), owner("n3", "active")};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1", false, out);
    c.move("q", "n3", std::chrono::seconds(10));
    EXPECT_EQ(node.asked.at(0), "MOVE wharf.owner q ");
    EXPECT_EQ(node.asked.at(2), "READ wharf.owner q ");
    EXPECT_EQ(out.str(), "queue 'q' is on n3 (epoch 4)\n");
}

// A move back to the owner cancels the move under way, and says so (it
// printed "moving from n1 to n1").
TEST(wharfctl_commands, a_move_back_to_the_owner_says_the_move_is_cancelled) {
    fake_node node;
    node.answers = {mgmt_reply{200, "OK", {}, datum{datum::map{{"name", text("q")}, {"node", text("n1")},
                                                                {"state", text("active")}, {"epoch", num(5)}}}}};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1", false, out);
    c.move("q", "n1", std::chrono::milliseconds(0));
    EXPECT_EQ(out.str(), "queue 'q': its move is cancelled; it stays on n1\n");
}

TEST(wharfctl_commands, rebalance_on_a_node_without_it_says_so) {
    fake_node node;
    node.answers = {{404, "unknown entity type 'wharf.placement'", {}, {}}};
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1", false, out);
    try {
        c.rebalance();
        FAIL();
    } catch (const status_error& e) {
        EXPECT_EQ(e.status, 404);
        EXPECT_NE(e.hint.find("cannot rebalance"), std::string::npos);
    }
}

TEST(wharfctl_commands, bad_arguments_are_usage_errors) {
    fake_node node;
    std::ostringstream out;
    ctl_commands c(std::ref(node), "n1", false, out);
    EXPECT_THROW(c.entity_operation("CREATE", "queue", "q", {"nokey"}), usage_error);
    EXPECT_TRUE(node.asked.empty());
}

} // namespace wharf::ctl
