// The queue engine on the real journal: "accepted" (ev_published) comes only
// after the message is in a synced segment file, and answers keep their order.

#include "broker/engine/queue_engine.hpp"
#include "broker/store/journal_format.hpp"
#include "broker/store/journal_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
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
        for (auto& e : events)
            if (auto* p = std::get_if<engine::ev_published>(&e)) {
                published_.push_back(*p);
                // What is on disk at the moment the answer is handed over.
                on_disk_.push_back(read_dir());
            }
        cv_.notify_all();
    }
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

} // namespace
} // namespace wharf::store
