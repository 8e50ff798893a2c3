// A vector whose first N elements live inside the object: no allocation for the handful of
// completions a poll or a post collects (a std::vector there cost a malloc and a free per
// message, ~180 instructions of ~1000 in a verbs send, callgrind in the soft-RoCE VM).
// Only what its users need: emplace_back, indexing, for_each, clear.
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace podnet {

template <typename T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  SmallVector(const SmallVector&) = delete;
  SmallVector& operator=(const SmallVector&) = delete;
  ~SmallVector() { clear(); }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (n_ < N) {
      T* p = ::new (static_cast<void*>(slot(n_))) T(std::forward<Args>(args)...);
      ++n_;
      return *p;
    }
    T& r = more_.emplace_back(std::forward<Args>(args)...);
    ++n_;
    return r;
  }
  size_t size() const noexcept { return n_; }
  T& operator[](size_t i) noexcept { return i < N ? *at(i) : more_[i - N]; }
  bool empty() const noexcept { return n_ == 0; }
  // Calls fn(element&) in insertion order.
  template <typename F>
  void for_each(F&& fn) {
    for (size_t i = 0; i < std::min(n_, N); ++i) fn(*at(i));
    for (T& x : more_) fn(x);
  }
  void clear() noexcept {
    for (size_t i = 0; i < std::min(n_, N); ++i) at(i)->~T();
    more_.clear();
    n_ = 0;
  }

 private:
  std::byte* slot(size_t i) noexcept { return storage_ + i * sizeof(T); }
  T* at(size_t i) noexcept { return std::launder(reinterpret_cast<T*>(slot(i))); }

  alignas(T) std::byte storage_[N * sizeof(T)];
  size_t n_ = 0;
  std::vector<T> more_;
};

}  // namespace podnet
