#pragma once
// message_body: the encoded bytes of one message, exactly as the producer sent
// them, in one allocation with an atomic reference count. Immutable once
// filled; shared between the receiving connection, the queue engine and the
// delivering connection without copies. About 16 bytes of overhead per message
// (a proton::message costs kilobytes).
//
// Thread-safety: the count is atomic; the bytes are written by one thread
// before the first hand-off and only read afterwards.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

namespace wharf::engine {

class message_body;

// Intrusive reference to a message_body.
class message_ref {
  public:
    message_ref() = default;
    message_ref(const message_ref& o);
    message_ref(message_ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    message_ref& operator=(message_ref o) noexcept { std::swap(p_, o.p_); return *this; }
    ~message_ref();

    // The largest body, 4 GiB - 128 KiB: a body's size is kept in 32 bits,
    // and so is the length of the journal record that stores it with its
    // queue's name (up to max_queue_name bytes) and a header. The node's
    // largest message (max-message-size, 0 meaning this) is never more.
    static constexpr size_t max_size = 0xFFFE'0000;

    // A body of `size` bytes whose contents the caller fills through data()
    // before sharing it. Throws std::length_error beyond max_size.
    static message_ref allocate(size_t size);
    static message_ref copy_of(std::string_view bytes);

    explicit operator bool() const { return p_ != nullptr; }
    std::string_view bytes() const;
    char* data();  // only before the first hand-off
    size_t size() const;

  private:
    message_body* p_ = nullptr;
};

} // namespace wharf::engine
