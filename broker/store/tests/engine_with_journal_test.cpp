// The queue engine on the real journal: "accepted" (ev_published) comes only
// after the message is in a synced segment file, answers keep their order,
// and what the disk's failures do to outcomes and to what a restart finds.

#include "broker/engine/queue_engine.hpp"
#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"
#include "broker/store/tests/store_test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

namespace wharf::store {
namespace {

class waiting_outbox final : public engine::outbox {
  public:
    void deliver(std::vector<engine::event>&& events) override {
        std::lock_guard l(mu_);
        for (auto& e : events) {
            if (auto* p = std::get_if<engine::ev_published>(&e)) {
                published_.push_back(*p);
                // What is on disk at the moment the answer is handed over.
                on_disk_.push_back(read_dir());
            }
            if (auto* d = std::get_if<engine::ev_deliver>(&e)) delivered_.push_back(d->seq);
        }
        cv_.notify_all();
    }
    bool wait_delivered(size_t n) {
        std::unique_lock l(mu_);
        return cv_.wait_for(l, std::chrono::seconds(10), [&] { return delivered_.size() >= n; });
    }
    std::vector<uint64_t> delivered_;
    bool wait_published(size_t n) {
        std::unique_lock l(mu_);
        return cv_.wait_for(l, std::chrono::seconds(10), [&] { return published_.size() >= n; });
    }
    std::string dir;
    std::vector<engine::ev_published> published_;
    std::vector<std::string> on_disk_;

  private:
    std::string read_dir() const {
        std::ifstream f(dir + "/" + segment_name(1), std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    std::mutex mu_;
    std::condition_variable cv_;
};

// An engine on a journal in a fresh directory, with one producer (link 1)
// on queue "q" whose events, like every link's, go to `out`.
struct engine_on_journal {
    explicit engine_on_journal(engine::engine_options eo = {}) {
        out->dir = dir.path;
        recovery_report r;
        auto opened = journal_store::open({dir.path, "n1"}, r);
        EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error());
        if (!opened) return;
        store = std::move(opened.value());
        engine = std::make_unique<engine::queue_engine>(std::move(eo), *store);
        engine->post(engine::cmd_attach_producer{1, "q", out});
    }
    ~engine_on_journal() { engine.reset(); } // before the store it writes to
    static engine::incoming_message message(const std::string& body, bool durable) {
        engine::incoming_message m;
        m.body = engine::message_ref::copy_of(body);
        m.durable = durable;
        return m;
    }
    void publish(std::vector<engine::incoming_message> ms) {
        engine->post(engine::cmd_publish{1, std::move(ms)});
    }

    test::temp_dir dir;
    std::shared_ptr<waiting_outbox> out = std::make_shared<waiting_outbox>();
    std::unique_ptr<journal_store> store;
    std::unique_ptr<engine::queue_engine> engine;
};

TEST(engine_with_journal, accepted_only_once_the_message_is_on_disk) {
    engine_on_journal f;
    ASSERT_TRUE(f.engine);
    f.publish({engine_on_journal::message("durable-payload-1", true)});
    f.publish({engine_on_journal::message("transient-payload-2", false)});
    ASSERT_TRUE(f.out->wait_published(2));
    EXPECT_NE(f.out->on_disk_[0].find("durable-payload-1"), std::string::npos)
        << "accepted before the message was written";
    EXPECT_EQ(f.out->published_[0].count, 1u);
    EXPECT_EQ(f.out->published_[1].count, 1u);
    EXPECT_EQ(f.out->on_disk_[1].find("transient-payload-2"), std::string::npos)
        << "a non-durable message was written";
}

// A sync that fails refuses the durable messages it was to cover, and only
// those: a non-durable message in the same batch is queued and stays
// accepted (refusing it would make the producer send it twice).
TEST(engine_with_journal, a_failed_sync_refuses_only_the_durable_messages) {
    engine_on_journal f;
    ASSERT_TRUE(f.engine);
    {
        test::file_size_limit tight(16); // room for the segment's header, no record
        f.publish({engine_on_journal::message("transient-first", false),
                   engine_on_journal::message(std::string(200, 'd'), true),
                   engine_on_journal::message("transient-last", false)});
        ASSERT_TRUE(f.out->wait_published(1));
    }
    const auto& ev = f.out->published_[0];
    EXPECT_EQ(ev.count, 3u);
    ASSERT_EQ(ev.failures.size(), 1u) << "only the durable message is refused";
    EXPECT_EQ(ev.failures[0].index, 1u);
    EXPECT_EQ(ev.failures[0].err.code, errc::resource_limit_exceeded);
    EXPECT_NE(ev.failures[0].err.description.find("could not store"), std::string::npos)
        << ev.failures[0].err.description;
}

bool poll_until(const std::function<bool()>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5)); // a poll, not a wait for a condition
    }
    return true;
}

// A message dead-lettered while the disk fails is not lost: its copy in the
// dead-letter queue is recorded like the source's remove, and the writer
// writes both once the disk works again. (The copy used to be kept in
// memory only while the remove reached the disk: after a restart the
// message was in neither queue.)
TEST(engine_with_journal, a_message_dead_lettered_while_the_disk_fails_survives_a_restart) {
    {
        engine::engine_options eo;
        eo.queue_defaults.dead_letter_queue = "dlq";
        engine_on_journal f(std::move(eo));
        ASSERT_TRUE(f.engine);
        f.publish({engine_on_journal::message("to-be-dead-lettered", true)});
        ASSERT_TRUE(f.out->wait_published(1));
        ASSERT_TRUE(f.out->published_[0].failures.empty());
        f.engine->post(engine::cmd_attach_consumer{2, "q", false, false, false, f.out});
        f.engine->post(engine::cmd_credit{2, 1, false});
        ASSERT_TRUE(f.out->wait_delivered(1));
        {
            // The disk fails: the next durable message is refused, and the
            // store says it cannot write. Then the consumer rejects the first,
            // which goes to the dead-letter queue.
            test::file_size_limit tight(f.out->on_disk_[0].size());
            f.publish({engine_on_journal::message("refused", true)});
            ASSERT_TRUE(poll_until([&] { return !f.store->writable(); })) << "the write did not fail";
            f.engine->post(
                engine::cmd_settle{2, {{f.out->delivered_[0], engine::outcome_kind::rejected}}, std::nullopt});
            f.engine->stats(); // the settle has been handled and committed
        }
        ASSERT_TRUE(poll_until([&] { return f.store->writable(); })) << "the disk never came back";
        f.engine->stats();
        f.engine.reset();
        f.store.reset();
        recovery_report again;
        auto reopened = journal_store::open({f.dir.path, "n1"}, again);
        ASSERT_TRUE(reopened.has_value()) << reopened.error();
        const auto* dlq = test::queue_of(again, "dlq");
        const auto* q = test::queue_of(again, "q");
        EXPECT_TRUE(dlq != nullptr && test::bodies(*dlq) == std::vector<std::string>{"to-be-dead-lettered"})
            << "the dead-lettered message is lost";
        for (const auto& body : q != nullptr ? test::bodies(*q) : std::vector<std::string>{})
            EXPECT_NE(body, "to-be-dead-lettered") << "the message is back in its queue";
    }
}

// A durable message that a consumer's modified outcome annotated is stored
// again with its new bytes: a restart finds the annotations, once.
TEST(engine_with_journal, an_annotated_message_is_stored_with_its_annotations) {
    // Sections: amqp-value "payload"; the outcome's map {x-opt-reason: "retry"}.
    const std::string message("\x00\x53\x77\xa1\x07payload", 12);
    const std::string map("\xc1\x16\x02\xa3\x0cx-opt-reason\xa1\x05retry", 24);
    const std::string annotated = std::string("\x00\x53\x72", 3) + map + message;
    {
        engine_on_journal f;
        ASSERT_TRUE(f.engine);
        f.publish({engine_on_journal::message(message, true)});
        ASSERT_TRUE(f.out->wait_published(1));
        f.engine->post(engine::cmd_attach_consumer{2, "q", false, false, false, f.out});
        f.engine->post(engine::cmd_credit{2, 1, false});
        ASSERT_TRUE(f.out->wait_delivered(1));
        f.engine->post(engine::cmd_settle{2, {{f.out->delivered_[0], engine::outcome_kind::modified_failed}},
                                          std::nullopt, {{f.out->delivered_[0], map}}});
        f.engine->stats(); // handled and committed
        f.engine.reset();
        f.store.reset();
        {
            recovery_report r;
            auto s = journal_store::open({f.dir.path, "n1"}, r);
            ASSERT_TRUE(s.has_value()) << s.error();
            const auto* q = test::queue_of(r, "q");
            ASSERT_TRUE(q != nullptr && q->size() == 1u) << "the message is lost, or there twice";
            EXPECT_EQ(std::string((*q)[0].body.bytes()), annotated) << "stored without its annotations";
            EXPECT_EQ((*q)[0].delivery_count, 1u);
        }
    }
}

} // namespace
} // namespace wharf::store
