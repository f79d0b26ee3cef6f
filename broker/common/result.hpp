#pragma once
// result<T, E>: a value or an error, in the spirit of std::expected (C++23)
// and Redpanda's result<T>. Used at every module boundary that can fail on
// untrusted input; broken invariants assert instead.

#include <cassert>
#include <utility>
#include <variant>

namespace wharf {

template <class E> struct failure {
    E error;
};
template <class E> failure<std::decay_t<E>> fail(E&& e) { return {std::forward<E>(e)}; }

template <class T, class E> class result {
  public:
    result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    result(failure<E> f) : v_(std::in_place_index<1>, std::move(f.error)) {}

    bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }

    T& value() & { assert(has_value()); return std::get<0>(v_); }
    const T& value() const& { assert(has_value()); return std::get<0>(v_); }
    T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const E& error() const { assert(!has_value()); return std::get<1>(v_); }

  private:
    std::variant<T, E> v_;
};

} // namespace wharf
