#pragma once
// A queue_engine driven directly on the test's thread (post() runs inline
// when the strand is idle), with an outbox that records events and a clock
// the test moves by hand.

#include "broker/engine/queue_engine.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace wharf::engine::testing {

class recording_outbox final : public outbox {
  public:
    void deliver(std::vector<event>&& events) override {
        for (auto& e : events) events_.push_back(std::move(e));
    }
    template <class T> std::vector<T> take() {
        std::vector<T> out;
        std::vector<event> rest;
        for (auto& e : events_) {
            if (auto* t = std::get_if<T>(&e)) out.push_back(std::move(*t));
            else rest.push_back(std::move(e));
        }
        events_.swap(rest);
        return out;
    }
    void clear() { events_.clear(); }

  private:
    std::vector<event> events_;
};

struct engine_fixture_options {
    bool auto_create = true;
    config::queue_policy defaults = {};
    std::vector<config::queue_declaration> queues = {};
    uint64_t max_message_size = 0;
};

class engine_fixture {
  public:
    explicit engine_fixture(engine_fixture_options o = {}) {
        engine_options eo;
        eo.node_id = "test";
        eo.auto_create_queues = o.auto_create;
        eo.queue_defaults = o.defaults;
        eo.queues = o.queues;
        eo.max_message_size = o.max_message_size;
        eo.clock = [this] { return now_ms; };
        engine = std::make_unique<queue_engine>(std::move(eo), store);
    }

    link_id consumer(const std::string& address, uint64_t credit = 0, bool browse = false,
                     bool presettled = false) {
        link_id id = ++next_link_;
        engine->post(cmd_attach_consumer{id, address, false, browse, presettled, out});
        if (credit) engine->post(cmd_credit{id, credit, false});
        return id;
    }
    link_id producer(const std::string& address) {
        link_id id = ++next_link_;
        engine->post(cmd_attach_producer{id, address, out});
        return id;
    }
    static incoming_message msg(const std::string& body, const std::string& to = {},
                                int64_t expiry = 0) {
        incoming_message m;
        m.body = message_ref::copy_of(body);
        m.to = to;
        m.expiry_ms = expiry;
        return m;
    }
    void publish(link_id p, std::vector<std::string> bodies) {
        cmd_publish c{p, {}};
        for (auto& b : bodies) c.messages.push_back(msg(b));
        engine->post(std::move(c));
    }
    void settle(link_id c, uint64_t seq, outcome_kind o) {
        engine->post(cmd_settle{c, {{seq, o}}, std::nullopt});
    }
    std::vector<ev_deliver> deliveries() { return out->take<ev_deliver>(); }
    static std::vector<std::string> bodies(const std::vector<ev_deliver>& ds) {
        std::vector<std::string> r;
        for (auto& d : ds) r.emplace_back(d.body.bytes());
        return r;
    }
    queue_stats stats(const std::string& name) {
        for (auto& s : engine->stats())
            if (s.name == name) return s;
        ADD_FAILURE() << "no queue " << name;
        return {};
    }
    bool has_queue(const std::string& name) {
        for (auto& s : engine->stats())
            if (s.name == name) return true;
        return false;
    }

    int64_t now_ms = 1'000'000;
    memory_store store;
    std::shared_ptr<recording_outbox> out = std::make_shared<recording_outbox>();
    std::unique_ptr<queue_engine> engine;

  private:
    link_id next_link_ = 0;
};

} // namespace wharf::engine::testing
