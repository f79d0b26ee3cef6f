// The Proton C++ interop agent (Debian's libqpid-proton-cpp 0.37, the
// container and messaging_handler API). Contract: ../CONTRACT.md; it mirrors
// the Python agent (../python/agent.py) command for command.
#include "typed_json.hpp"

#include <proton/codec/encoder.hpp>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/scalar.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace wharf::interop;
using clock_type = std::chrono::steady_clock;

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct options {
    std::string command, url, sasl = "none", queue, file, refill = "window", role = "receiver", entity_type;
    double timeout = 20;
    int count = 1, credit = 100;
    bool outcomes = false;
    std::optional<std::string> selector;
};

const char* const usage =
    "usage: wharf-interop-agent-cpp send|receive|attach|request|mgmt-query --url HOST:PORT\n"
    "       [--sasl none|anonymous] [--timeout S] [--queue Q] [--file F] [--count N] [--credit C]\n"
    "       [--refill each|window] [--outcomes] [--selector S] [--role sender|receiver] [--entity-type T]";

int int_arg(const std::string& flag, const std::string& s) {
    try {
        size_t end = 0;
        int x = std::stoi(s, &end);
        if (end == s.size()) return x;
    } catch (const std::exception&) {
    }
    throw usage_error(flag + ": not an integer: " + s);
}

options parse(int argc, char** argv) {
    options o;
    std::vector<std::string> args(argv + 1, argv + argc);
    const std::set<std::string> commands = {"send", "receive", "attach", "request", "mgmt-query"};
    for (size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i], v;
        if (a == "--outcomes") {
            o.outcomes = true;
            continue;
        }
        if (a.rfind("--", 0) != 0) {
            if (!o.command.empty() || !commands.count(a)) throw usage_error("unexpected argument " + a);
            o.command = a;
            continue;
        }
        if (auto eq = a.find('='); eq != std::string::npos) {
            v = a.substr(eq + 1);
            a = a.substr(0, eq);
        } else if (i + 1 < args.size()) {
            v = args[++i];
        } else {
            throw usage_error(a + " needs a value");
        }
        auto one_of = [&](std::initializer_list<const char*> allowed) {
            for (const char* x : allowed)
                if (v == x) return v;
            throw usage_error(a + ": invalid choice " + v);
        };
        if (a == "--url") o.url = v;
        else if (a == "--sasl") o.sasl = one_of({"none", "anonymous"});
        else if (a == "--timeout") {
            try {
                o.timeout = std::stod(v);
            } catch (const std::exception&) {
                throw usage_error("--timeout: not a number: " + v);
            }
        } else if (a == "--queue") o.queue = v;
        else if (a == "--file") o.file = v;
        else if (a == "--count") o.count = int_arg(a, v);
        else if (a == "--credit") o.credit = int_arg(a, v);
        else if (a == "--refill") o.refill = one_of({"each", "window"});
        else if (a == "--role") o.role = one_of({"sender", "receiver"});
        else if (a == "--entity-type") o.entity_type = v;
        else if (a == "--selector") o.selector = v;
        else throw usage_error("unknown option " + a);
    }
    if (o.command.empty()) throw usage_error("no command");
    if (o.url.empty()) throw usage_error("--url is required");
    if ((o.command == "send" || o.command == "request") && (o.queue.empty() || o.file.empty()))
        throw usage_error(o.command + " needs --queue and --file");
    if ((o.command == "receive" || o.command == "attach") && o.queue.empty())
        throw usage_error(o.command + " needs --queue");
    if (o.command == "mgmt-query" && o.entity_type.empty()) throw usage_error("mgmt-query needs --entity-type");
    if (o.credit < 1 || o.count < 0) throw usage_error("--credit must be positive and --count not negative");
    return o;
}

// Proton C++ has no selector helper: a filter-set of one entry, named as
// Proton's receive_selector example names it, described by the filter's symbol.
proton::source::filter_map selector_filter(const std::string& selector) {
    proton::value described;
    proton::codec::encoder enc(described);
    enc << proton::codec::start::described() << proton::symbol("apache.org:selector-filter:string") << selector
        << proton::codec::finish();
    proton::source::filter_map filters;
    filters.put(proton::symbol("selector"), described);
    return filters;
}

std::vector<proton::message> load_messages(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read " + file);
    json spec = json::parse(in);
    if (!spec.is_array()) throw std::invalid_argument(file + ": not a JSON list of messages");
    std::vector<proton::message> out;
    for (const auto& m : spec) out.push_back(to_message(m));
    return out;
}

std::string outcome_name(enum proton::transfer::state s) {
    switch (s) {
    case proton::transfer::ACCEPTED: return "accepted";
    case proton::transfer::REJECTED: return "rejected";
    case proton::transfer::RELEASED: return "released";
    case proton::transfer::MODIFIED: return "modified";
    default: return proton::to_string(s);
    }
}

std::string described(const std::string& what, const proton::error_condition& c) {
    return c.empty() ? what : what + ": " + c.name() + " " + c.description();
}

class agent : public proton::messaging_handler {
  public:
    explicit agent(options o) : a_(std::move(o)) {}

    std::optional<json> result;
    std::optional<std::string> failure;

    // ---- common ---------------------------------------------------------------------

    void on_container_start(proton::container& c) override {
        container_ = &c;
        deadline_ = clock_type::now() + std::chrono::milliseconds(int64_t(a_.timeout * 1000));
        if (a_.command == "send") to_send_ = load_messages(a_.file);
        if (a_.command == "request") request_ = load_messages(a_.file).at(0);
        proton::connection_options co;
        if (a_.sasl == "none")
            co.sasl_enabled(false);
        else
            co.sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
        conn_ = c.connect("amqp://" + a_.url, co);
        tick();
    }

    void on_connection_open(proton::connection& c) override {
        if (a_.command == "send") {
            c.open_sender(a_.queue);
        } else if (a_.command == "receive") {
            auto ro = proton::receiver_options().credit_window(0).auto_accept(false);
            if (a_.selector) ro.source(proton::source_options().filters(selector_filter(*a_.selector)));
            receiver_ = c.open_receiver(a_.queue, ro);
            receiver_.add_credit(uint32_t(a_.credit));
        } else if (a_.command == "attach") {
            if (a_.role == "sender")
                link_ = c.open_sender(a_.queue);
            else
                link_ = c.open_receiver(a_.queue, proton::receiver_options().credit_window(0).auto_accept(false));
        } else if (a_.command == "request") {
            request_.to(a_.queue);  // anonymous relay: the target is null
            open_request_links(c, std::nullopt);
        } else {
            request_ = proton::message();
            request_.id(std::string("q1"));
            request_.properties().put("operation", "QUERY");
            request_.properties().put("type", "org.amqp.management");
            request_.properties().put("name", "self");
            request_.properties().put("entityType", a_.entity_type);
            request_.body(from_typed(json::parse(R"({"type": "map", "value": [
                [{"type": "string", "value": "attributeNames"}, {"type": "list", "value": []}]]})")));
            open_request_links(c, std::string("$management"));
        }
    }

    // Runs every 100 ms: the --timeout, the 2 s of `attach`, and a stop that
    // does not wait for ever on the peer's close. Once the container stops it
    // is not scheduled again, so run() returns.
    void tick() {
        if (stopped_) return;
        auto now = clock_type::now();
        if (!stopping_) {
            if (now >= deadline_) {
                std::ostringstream s;
                s << "timed out after " << a_.timeout << "s";
                fail(s.str());
            } else if (opened_at_ && now - *opened_at_ >= std::chrono::seconds(2)) {
                finish(json{{"opened", true}});
            }
        } else if (now - stop_started_ >= std::chrono::seconds(2)) {
            stop_container();
            return;
        }
        container_->schedule(proton::duration(100), [this] { tick(); });
    }

    void finish(json r) {
        if (!result && !failure) result = std::move(r);
        stop();
    }

    void fail(const std::string& what) {
        if (!result && !failure) failure = what;
        stop();
    }

    // Closes the connection; the container stops when the peer's close (or the
    // transport's end) comes back, so every settlement is on the wire first.
    void stop() {
        if (stopping_) return;
        stopping_ = true;
        stop_started_ = clock_type::now();
        if (conn_ && !conn_.closed() && conn_.active()) {
            conn_.close();
            conn_.wake();  // from a timer the close would wait for the connection's next event
        } else {
            stop_container();
        }
    }

    void stop_container() {
        if (stopped_) return;
        stopped_ = true;
        container_->stop();
    }

    void on_connection_close(proton::connection&) override {
        if (!stopping_) fail("connection closed by the peer");
        stop_container();
    }
    void on_transport_close(proton::transport&) override {
        if (!stopping_) fail("connection lost");
        stop_container();
    }
    void on_transport_error(proton::transport& t) override { fail(described("transport error", t.error())); }
    void on_connection_error(proton::connection& c) override { fail(described("connection closed", c.error())); }
    void on_session_error(proton::session&) override { fail("session ended with an error"); }
    void on_error(const proton::error_condition& c) override { fail(described("error", c)); }

    void on_receiver_error(proton::receiver& r) override { link_error(r, r.error()); }
    void on_sender_error(proton::sender& s) override { link_error(s, s.error()); }
    void on_receiver_close(proton::receiver& r) override { link_closed(r); }
    void on_sender_close(proton::sender& s) override { link_closed(s); }
    void on_receiver_detach(proton::receiver& r) override { link_closed(r); }
    void on_sender_detach(proton::sender& s) override { link_closed(s); }

    void link_error(proton::link& l, const proton::error_condition& c) {
        if (a_.command == "attach")
            link_closed(l);
        else
            fail(described("link detached", c));
    }

    // ---- send -----------------------------------------------------------------------

    void on_sendable(proton::sender& s) override {
        if (stopping_) return;
        if (a_.command != "send") {
            try_send();
            return;
        }
        while (next_ < to_send_.size() && s.credit() > 0) {
            index_[s.send(to_send_[next_])] = next_;
            ++next_;
        }
        if (to_send_.empty()) finish(json{{"outcomes", json::array()}});
    }

    void on_tracker_settle(proton::tracker& t) override {
        auto it = index_.find(t);
        if (it == index_.end()) return;
        outcomes_[it->second] = outcome_name(t.state());
        index_.erase(it);
        if (outcomes_.size() == to_send_.size()) {
            json out = json::array();
            for (const auto& [i, o] : outcomes_) out.push_back(o);
            finish(json{{"outcomes", out}});
        }
    }

    // ---- receive --------------------------------------------------------------------

    void on_message(proton::delivery& d, proton::message& m) override {
        if (stopping_) return;
        if (a_.command == "request") {
            d.accept();
            finish(json{{"reply_to", reply_to_}, {"reply", from_message(m)}});
            return;
        }
        if (a_.command == "mgmt-query") {
            d.accept();
            int64_t status = 0;
            if (m.properties().exists("statusCode")) status = proton::coerce<int64_t>(m.properties().get("statusCode"));
            finish(json{{"status", status}, {"body", to_typed(m.body())}});
            return;
        }
        if (a_.command != "receive") return;
        json got = from_message(m);
        messages_.push_back(got);
        std::string want;
        if (a_.outcomes && m.properties().exists("want")) {
            proton::scalar w = m.properties().get("want");
            if (w.type() == proton::STRING) want = proton::get<std::string>(w);
            if (w.type() == proton::SYMBOL) want = proton::get<proton::symbol>(w);
        }
        // First arrival by message id (no id: one key for all of them).
        std::string key = got.contains("properties") && got["properties"].contains("message_id")
                              ? got["properties"]["message_id"].dump()
                              : std::string();
        bool first = seen_.insert(key).second;
        if (want == "release" && first) {
            d.release();
        } else if (want == "modify" && first) {
            // Proton C++ 0.37 cannot set delivery-failed: modify() sends
            // modified with delivery-failed and undeliverable-here both false.
            d.modify();
        } else if (want == "reject") {
            d.reject();
            ++final_;
        } else {
            d.accept();
            ++final_;
        }
        proton::receiver r = d.receiver();
        if (a_.refill == "each")
            r.add_credit(1);
        else if (r.credit() < a_.credit / 2 || r.credit() == 0)
            r.add_credit(uint32_t(a_.credit - r.credit()));
        if (final_ >= a_.count) finish(json{{"messages", messages_}});
    }

    // ---- attach ---------------------------------------------------------------------

    void on_receiver_open(proton::receiver& r) override { link_opened(r); }
    void on_sender_open(proton::sender& s) override { link_opened(s); }

    void link_opened(proton::link& l) {
        if (a_.command == "attach" && l == link_) {
            opened_at_ = clock_type::now();  // stays attached 2 s: then it counts as opened (tick)
        } else if ((a_.command == "request" || a_.command == "mgmt-query") && l == replies_) {
            reply_to_ = replies_.source().address();
            try_send();
        }
    }

    void link_closed(proton::link& l) {
        if (a_.command != "attach" || l != link_ || stopping_) return;
        proton::error_condition c = l.error();
        json info = nullptr;
        if (!c.empty() && !c.properties().empty()) info = to_typed(c.properties());
        json detached = json::object();
        detached["condition"] = c.empty() ? json(nullptr) : json(c.name());
        detached["description"] = c.empty() || c.description().empty() ? json(nullptr) : json(c.description());
        detached["info"] = info;
        finish(json{{"detached", detached}});
    }

    // ---- request, mgmt-query --------------------------------------------------------

    void open_request_links(proton::connection& c, const std::optional<std::string>& target) {
        proton::source_options dynamic;
        dynamic.dynamic(true);
        replies_ = c.open_receiver("", proton::receiver_options().source(dynamic).credit_window(0).auto_accept(false));
        replies_.add_credit(1);
        if (target)
            out_ = c.open_sender(*target);
        else
            out_ = c.open_sender("", proton::sender_options().target(proton::target_options().anonymous(true)));
    }

    // The one request, once the reply queue is known and the sender has credit.
    void try_send() {
        if (sent_ || reply_to_.empty() || !out_ || out_.credit() <= 0) return;
        request_.reply_to(reply_to_);
        out_.send(request_);
        sent_ = true;
    }

  private:
    options a_;
    proton::container* container_ = nullptr;
    proton::connection conn_;
    clock_type::time_point deadline_, stop_started_;
    std::optional<clock_type::time_point> opened_at_;
    bool stopping_ = false, stopped_ = false;
    // send
    std::vector<proton::message> to_send_;
    size_t next_ = 0;
    std::map<proton::tracker, size_t> index_;
    std::map<size_t, std::string> outcomes_;
    // receive
    proton::receiver receiver_;
    json messages_ = json::array();
    std::set<std::string> seen_;
    int final_ = 0;
    // attach
    proton::link link_;
    // request, mgmt-query
    proton::receiver replies_;
    proton::sender out_;
    proton::message request_;
    std::string reply_to_;
    bool sent_ = false;
};

void print(const json& j) {
    // ASCII-only, like Python's json.dumps; bad UTF-8 from the wire is replaced.
    std::cout << j.dump(-1, ' ', true, json::error_handler_t::replace) << std::endl;
}

} // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse(argc, argv);
    } catch (const usage_error& e) {
        std::cerr << usage << "\n" << e.what() << std::endl;
        print(json{{"error", std::string("usage: ") + e.what()}});
        return 2;
    }
    try {
        // What Proton C++ cannot send shows before connecting.
        if (o.command == "send" || o.command == "request") {
            auto messages = load_messages(o.file);
            if (o.command == "request" && messages.empty()) throw std::invalid_argument(o.file + ": no message");
        }
    } catch (const unsupported& e) {
        print(json{{"unsupported", e.what()}});
        return 3;
    } catch (const std::exception& e) {
        print(json{{"error", e.what()}});
        return 1;
    }
    agent a(o);
    try {
        proton::container(a).run();
    } catch (const std::exception& e) {
        if (!a.failure) a.failure = e.what();
        a.result.reset();
    }
    if (a.failure) {
        print(json{{"error", *a.failure}});
        return 1;
    }
    if (!a.result) {
        print(json{{"error", "stopped without a result"}});
        return 1;
    }
    print(*a.result);
    return 0;
}
