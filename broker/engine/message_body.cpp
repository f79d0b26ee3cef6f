#include "broker/engine/message_body.hpp"

#include <array>
#include <cstring>
#include <new>

namespace wharf::engine {

class message_body {
  public:
    std::atomic<uint32_t> refs{1};
    uint32_t size = 0;
    char* data() { return reinterpret_cast<char*>(this + 1); }
};
static_assert(sizeof(message_body) == 8);

namespace {

// Per-thread free lists of message bodies, by size class.
//
// A node with many queues in use has tens of thousands of messages in flight,
// allocated in one event batch and freed many batches later, in another order.
// glibc's own per-thread cache holds 7 blocks a size, so nearly every body then
// came from and went back to the arena's bins, with their coalescing and cache
// misses: malloc and free were 12 % of the node's CPU at 1,000 queues against
// 4 % at one (docs/benchmarks.md, "Message bodies from a per-thread cache").
// Here a freed body goes onto its thread's list for its class and the next
// body of that class takes the most recently freed one, still in cache. A body
// freed on another thread than the one that allocated it joins that thread's
// list; every block comes from ::operator new and can end anywhere.
//
// Bounded: at most kCacheBytes of free blocks a thread; the rest goes back to
// malloc. Bodies over kMaxPooled bytes (1 KB messages and up) always do.
// Under AddressSanitizer nothing is cached, so a use after free stays visible.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooling = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif
#else
constexpr bool kPooling = true;
#endif

constexpr size_t kClassBytes = 64;
constexpr size_t kClasses = 16;  // blocks of 64 .. 1,024 bytes
constexpr size_t kMaxPooled = kClasses * kClassBytes;
constexpr size_t kCacheBytes = 4u << 20;

struct free_block {
    free_block* next;
};

// Blocks of class c are (c + 1) * kClassBytes long.
size_t class_of(size_t block_bytes) { return (block_bytes - 1) / kClassBytes; }

class body_cache {
  public:
    body_cache() = default;
    body_cache(const body_cache&) = delete;
    body_cache& operator=(const body_cache&) = delete;
    ~body_cache() {
        for (auto* head : heads_) {
            while (head) ::operator delete(std::exchange(head, head->next));
        }
    }

    void* take(size_t c) {
        free_block* b = heads_[c];
        if (!b) return ::operator new((c + 1) * kClassBytes);
        heads_[c] = b->next;
        bytes_ -= (c + 1) * kClassBytes;
        return b;
    }

    void give(size_t c, void* p) {
        const size_t n = (c + 1) * kClassBytes;
        if (bytes_ + n > kCacheBytes) {
            ::operator delete(p);
            return;
        }
        heads_[c] = new (p) free_block{heads_[c]};
        bytes_ += n;
    }

  private:
    std::array<free_block*, kClasses> heads_{};
    size_t bytes_ = 0;
};

// The cache lives as long as its thread. `state` is trivially destructible, so
// a body freed after the cache's destructor ran (a thread_local or static that
// still held one) sees `dead` and goes straight to ::operator delete.
enum class cache_state : unsigned char { unborn, alive, dead };
thread_local cache_state state = cache_state::unborn;

struct cache_holder {
    body_cache cache;
    cache_holder() { state = cache_state::alive; }
    ~cache_holder() { state = cache_state::dead; }
};

body_cache* this_thread_cache() {
    if (state == cache_state::dead) return nullptr;
    thread_local cache_holder holder;
    return &holder.cache;
}

void* allocate_block(size_t block_bytes) {
    if (kPooling && block_bytes <= kMaxPooled) {
        if (auto* cache = this_thread_cache()) return cache->take(class_of(block_bytes));
        return ::operator new((class_of(block_bytes) + 1) * kClassBytes);
    }
    return ::operator new(block_bytes);
}

void free_block_of(void* p, size_t block_bytes) {
    if (kPooling && block_bytes <= kMaxPooled) {
        if (auto* cache = this_thread_cache()) return cache->give(class_of(block_bytes), p);
    }
    ::operator delete(p);
}

} // namespace

message_ref message_ref::allocate(size_t size) {
    void* mem = allocate_block(sizeof(message_body) + size);
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
        free_block_of(p_, block_bytes);
    }
}

std::string_view message_ref::bytes() const {
    return p_ ? std::string_view(p_->data(), p_->size) : std::string_view();
}
char* message_ref::data() { return p_->data(); }
size_t message_ref::size() const { return p_ ? p_->size : 0; }

} // namespace wharf::engine
