// A table of objects addressed by 40-bit ids that fit a work request's wr_id (qp.h): a slot
// index in the low 20 bits, the slot's generation above it. Insert, find and erase cost a few
// loads and no allocation once the table has grown to the number in flight (a hash map node
// per operation showed up in the verbs latency profile). An id whose slot was freed, or
// reused since, is not found: a completion that arrives after its operation failed finds
// nothing. References stay valid until their own erase (std::deque never moves elements on
// push_back). Pure, so it is unit-tested on hosts without RDMA. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <utility>
#include <vector>

namespace podnet::verbs {

template <typename T>
class SlotTable {
 public:
  static constexpr uint64_t kIndexBits = 20;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  static constexpr uint64_t kGenMask = (uint64_t{1} << 20) - 1;

  // A fresh, default-constructed entry and its id (never 0).
  std::pair<uint64_t, T&> emplace() {
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      // 2^20 operations in flight on one endpoint (its queues hold a few hundred): an id
      // would alias another. Stop loudly rather than complete the wrong request.
      if (slots_.size() > kIndexMask) std::abort();
      i = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[i];
    s.gen = (s.gen + 1) & kGenMask;
    if (s.gen == 0) s.gen = 1;  // id 0 is never handed out
    s.live = true;
    ++size_;
    return {uint64_t{s.gen} << kIndexBits | i, s.value};
  }

  T* find(uint64_t id) {
    const uint64_t i = id & kIndexMask;
    if (i >= slots_.size()) return nullptr;
    Slot& s = slots_[i];
    return s.live && s.gen == (id >> kIndexBits & kGenMask) ? &s.value : nullptr;
  }

  // Resets the entry (its destructor's work, e.g. a reference count, happens here).
  void erase(uint64_t id) {
    const uint64_t i = id & kIndexMask;
    if (find(id) == nullptr) return;
    Slot& s = slots_[i];
    s.value = T{};
    s.live = false;
    free_.push_back(static_cast<uint32_t>(i));
    --size_;
  }

  template <typename F>
  void for_each(F&& f) {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].live) f(uint64_t{slots_[i].gen} << kIndexBits | i, slots_[i].value);
  }

  void clear() {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].live) erase(uint64_t{slots_[i].gen} << kIndexBits | i);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Slot {
    T value{};
    uint32_t gen = 0;
    bool live = false;
  };
  std::deque<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t size_ = 0;
};

}  // namespace podnet::verbs
