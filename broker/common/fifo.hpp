#pragma once
// fifo<T>: a first-in-first-out queue in one vector that keeps its capacity.
//
// For per-link queues that fill and empty with every event batch (a link's
// messages awaiting the engine's answer). std::deque frees a 512-byte block
// each time the front leaves one and allocates one each time the back enters
// one; with a thousand links of a few messages each that was a malloc and a
// free every few messages (docs/benchmarks.md). Here taking the front moves an
// index; the vector is cleared (capacity kept) when it empties, and its taken
// front is erased once it is more than half of it.
//
// Not thread-safe; T must be movable.

#include <cstddef>
#include <utility>
#include <vector>

namespace wharf {

template <typename T>
class fifo {
  public:
    bool empty() const { return head_ == items_.size(); }
    size_t size() const { return items_.size() - head_; }

    void push_back(T v) { items_.push_back(std::move(v)); }

    T& front() { return items_[head_]; }
    const T& front() const { return items_[head_]; }

    void pop_front() {
        if (++head_ == items_.size()) {
            clear();
        } else if (head_ >= kCompactAt && head_ * 2 >= items_.size()) {
            items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
            head_ = 0;
        }
    }

    void clear() {
        items_.clear();
        head_ = 0;
    }

  private:
    static constexpr size_t kCompactAt = 64;
    std::vector<T> items_;
    size_t head_ = 0;
};

} // namespace wharf
