// The queue engine on the real journal: "accepted" (ev_published) comes only
// after the message is in a synced segment file, and answers keep their order.

#include "broker/engine/queue_engine.hpp"
#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <csignal>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

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

TEST(engine_with_journal, accepted_only_once_the_message_is_on_disk) {
    char tmpl[] = "/tmp/wharf-engine-journal-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    {
        recovery_report r;
        auto store = journal_store::open({dir, "n1"}, r);
        ASSERT_TRUE(store.has_value()) << store.error();
        engine::engine_options eo;
        engine::queue_engine engine(std::move(eo), *store.value());
        auto out = std::make_shared<waiting_outbox>();
        out->dir = dir;
        engine.post(engine::cmd_attach_producer{1, "q", out});

        engine::cmd_publish durable{1, {}};
        engine::incoming_message m;
        m.body = engine::message_ref::copy_of("durable-payload-1");
        m.durable = true;
        durable.messages.push_back(std::move(m));
        engine.post(std::move(durable));

        engine::cmd_publish transient{1, {}};
        engine::incoming_message t;
        t.body = engine::message_ref::copy_of("transient-payload-2");
        transient.messages.push_back(std::move(t));
        engine.post(std::move(transient));

        ASSERT_TRUE(out->wait_published(2));
        EXPECT_NE(out->on_disk_[0].find("durable-payload-1"), std::string::npos)
            << "accepted before the message was written";
        EXPECT_EQ(out->published_[0].count, 1u);
        EXPECT_EQ(out->published_[1].count, 1u);
        EXPECT_EQ(out->on_disk_[1].find("transient-payload-2"), std::string::npos)
            << "a non-durable message was written";
    }
    std::system(("rm -rf '" + dir + "'").c_str());
}

// A sync that fails refuses the durable messages it was to cover, and only
// those: a non-durable message in the same batch is queued and stays
// accepted (refusing it would make the producer send it twice).
TEST(engine_with_journal, a_failed_sync_refuses_only_the_durable_messages) {
    char tmpl[] = "/tmp/wharf-engine-journal-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    std::signal(SIGXFSZ, SIG_IGN); // as wharfd does: a file-size limit is a write error
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    {
        recovery_report r;
        auto store = journal_store::open({dir, "n1"}, r);
        ASSERT_TRUE(store.has_value()) << store.error();
        engine::engine_options eo;
        engine::queue_engine engine(std::move(eo), *store.value());
        auto out = std::make_shared<waiting_outbox>();
        out->dir = dir;
        engine.post(engine::cmd_attach_producer{1, "q", out});

        // Room for the segment's header and no record: the write fails.
        rlimit tight = old;
        tight.rlim_cur = 16;
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
        engine::cmd_publish batch{1, {}};
        engine::incoming_message t;
        t.body = engine::message_ref::copy_of("transient-first");
        batch.messages.push_back(std::move(t));
        engine::incoming_message m;
        m.body = engine::message_ref::copy_of(std::string(200, 'd'));
        m.durable = true;
        batch.messages.push_back(std::move(m));
        engine::incoming_message t2;
        t2.body = engine::message_ref::copy_of("transient-last");
        batch.messages.push_back(std::move(t2));
        engine.post(std::move(batch));
        const bool answered = out->wait_published(1);
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
        ASSERT_TRUE(answered);
        const auto& ev = out->published_[0];
        EXPECT_EQ(ev.count, 3u);
        ASSERT_EQ(ev.failures.size(), 1u) << "only the durable message is refused";
        EXPECT_EQ(ev.failures[0].index, 1u);
        EXPECT_EQ(ev.failures[0].err.code, errc::resource_limit_exceeded);
        EXPECT_NE(ev.failures[0].err.description.find("could not store"), std::string::npos)
            << ev.failures[0].err.description;
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::system(("rm -rf '" + dir + "'").c_str());
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
    char tmpl[] = "/tmp/wharf-engine-journal-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    {
        recovery_report r;
        auto store = journal_store::open({dir, "n1"}, r);
        ASSERT_TRUE(store.has_value()) << store.error();
        journal_store& js = *store.value();
        engine::engine_options eo;
        eo.queue_defaults.dead_letter_queue = "dlq";
        engine::queue_engine engine(std::move(eo), js);
        auto out = std::make_shared<waiting_outbox>();
        out->dir = dir;
        engine.post(engine::cmd_attach_producer{1, "q", out});
        auto durable = [](const std::string& body) {
            engine::incoming_message m;
            m.body = engine::message_ref::copy_of(body);
            m.durable = true;
            return m;
        };
        engine::cmd_publish first{1, {}};
        first.messages.push_back(durable("to-be-dead-lettered"));
        engine.post(std::move(first));
        ASSERT_TRUE(out->wait_published(1));
        ASSERT_TRUE(out->published_[0].failures.empty());
        engine.post(engine::cmd_attach_consumer{2, "q", false, false, false, out});
        engine.post(engine::cmd_credit{2, 1, false});
        ASSERT_TRUE(out->wait_delivered(1));

        // The disk fails: the next durable message is refused, and the store
        // says it cannot write.
        rlimit tight = old;
        tight.rlim_cur = static_cast<rlim_t>(out->on_disk_[0].size());
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
        engine::cmd_publish second{1, {}};
        second.messages.push_back(durable("refused"));
        engine.post(std::move(second));
        const bool failed = poll_until([&] { return !js.writable(); });
        // Now the consumer rejects the first: it goes to the dead-letter queue.
        engine.post(engine::cmd_settle{2, {{out->delivered_[0], engine::outcome_kind::rejected}}, std::nullopt});
        engine.stats(); // the settle has been handled and committed
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
        ASSERT_TRUE(failed) << "the write did not fail";
        ASSERT_TRUE(poll_until([&] { return js.writable(); })) << "the disk never came back";
        engine.stats();
    }
    recovery_report again;
    auto reopened = journal_store::open({dir, "n1"}, again);
    ASSERT_TRUE(reopened.has_value()) << reopened.error();
    size_t in_dlq = 0, in_q = 0;
    for (auto& [name, entries] : again.queues) {
        for (auto& e : entries) {
            if (name == "dlq" && e.body.bytes() == "to-be-dead-lettered") ++in_dlq;
            if (name == "q" && e.body.bytes() == "to-be-dead-lettered") ++in_q;
        }
    }
    EXPECT_EQ(in_dlq, 1u) << "the dead-lettered message is lost";
    EXPECT_EQ(in_q, 0u) << "the message is back in its queue";
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::system(("rm -rf '" + dir + "'").c_str());
}

} // namespace
} // namespace wharf::store
