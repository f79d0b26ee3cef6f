#pragma once
// management_service: the node's `$management` node (OASIS AMQP Management,
// working draft 11). Requests come from any client connection; worker
// threads answer them one at a time (management may wait for the queue
// engine, the metadata store or other nodes; the message path never waits
// for it), and the answer goes to the request's reply-to through `publish`.
// Requests other nodes send (application property `wharf:scope` = "node")
// have a worker of their own and never reach types that ask other nodes:
// two nodes asking each other at once cannot wait on each other.
//
// Node-level operations (type org.amqp.management, name self): GET-TYPES,
// GET-ATTRIBUTES, GET-OPERATIONS, GET-MGMT-NODES, QUERY. Entity types come
// from the broker and from plugins (plugins::entity_type); "wharf.queue" is
// also found as "queue". READ and QUERY are answered from a type's query();
// every other operation the type declares goes to its invoke() (with
// several providers of one type, the last that handles() it).
//
// Threads: add_type before start(); submit() from any thread.

#include "broker/management/request.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wharf::management {

class management_service {
  public:
    using publish_fn = std::function<void(const std::string& reply_to, std::string bytes)>;

    explicit management_service(publish_fn publish);
    ~management_service();
    management_service(const management_service&) = delete;
    management_service& operator=(const management_service&) = delete;

    // Several providers may offer one type name (the broker's wharf.queue
    // figures, the wlm plugin's owners): their entities are merged by name.
    void add_type(plugins::entity_type& t);
    void start();
    void stop();
    void submit(request&& r);

    // The answer to one request (the worker calls it; tests may too).
    reply handle(const request& r);

    static constexpr std::string_view node_type = "org.amqp.management";

  private:
    class merged_type;

    merged_type* find_type(const std::string& name) const;
    reply node_operation(const request& r);
    reply query(merged_type& t, const request& r);
    reply read(merged_type& t, const request& r);
    void run(bool node_scope);

    publish_fn publish_;
    std::vector<std::unique_ptr<merged_type>> merged_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<request> queue_, node_queue_; // node_queue_: wharf:scope = node
    bool stop_ = false;
    std::thread worker_, node_worker_;
};

} // namespace wharf::management
