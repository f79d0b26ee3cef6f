#include "broker/engine/message_body.hpp"

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace wharf::engine {

class message_body {
  public:
    std::atomic<uint32_t> refs{1};
    uint32_t size = 0;
    char* data() { return reinterpret_cast<char*>(this + 1); }
};
static_assert(sizeof(message_body) == 8);

// Every body is one ::operator new of its header and bytes, and goes back with
// a sized ::operator delete. The allocator (jemalloc in the default build)
// keeps freed blocks per thread and per size class itself: a free list of our
// own in front of it, built when glibc's malloc was the node's, made a node
// with many queues in use slower, not faster (docs/benchmarks.md, "jemalloc").

message_ref message_ref::allocate(size_t size) {
    // Checked before anything is allocated: a size kept wrongly would also
    // hand the allocator the wrong size when the body is freed.
    if (size > max_size) throw std::length_error("message body of " + std::to_string(size) + " bytes");
    void* mem = ::operator new(sizeof(message_body) + size);
    message_ref r;
    r.p_ = new (mem) message_body();
    r.p_->size = static_cast<uint32_t>(size);
    return r;
}

message_ref message_ref::copy_of(std::string_view bytes) {
    message_ref r = allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(r.data(), bytes.data(), bytes.size());
    return r;
}

message_ref::message_ref(const message_ref& o) : p_(o.p_) {
    if (p_) p_->refs.fetch_add(1, std::memory_order_relaxed);
}

message_ref::~message_ref() {
    if (p_ && p_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const size_t block_bytes = sizeof(message_body) + p_->size;
        p_->~message_body();
        ::operator delete(p_, block_bytes);
    }
}

std::string_view message_ref::bytes() const {
    return p_ ? std::string_view(p_->data(), p_->size) : std::string_view();
}
char* message_ref::data() { return p_->data(); }
size_t message_ref::size() const { return p_ ? p_->size : 0; }

} // namespace wharf::engine
