// Fixed-size blocks for the objects every message allocates (a request, an unexpected
// message): one free list per thread, bounded. A block freed on another thread than the one
// that allocated it joins that thread's list. glibc's per-thread cache keeps 7 chunks per
// size; a sender running ahead of its receiver frees dozens at a time, and the rest went
// through malloc's slow path (unexpected 8 B messages: ~260 instructions each of ~950,
// callgrind, bench/results/experiments-2026-12-04/unexpected_path.cc).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace podnet::detail {

inline constexpr size_t kPoolBlock = 512;
inline constexpr size_t kPoolKeep = 256;  // blocks a thread's list holds at most

// A block freed after the thread's list is gone (a static's destructor at exit releasing a
// message or a request) goes straight back to the heap: t_pool_gone is a plain flag,
// readable until the thread itself is gone.
inline thread_local bool t_pool_gone = false;
struct PoolFreeList {
  std::vector<void*> blocks;
  ~PoolFreeList() {
    t_pool_gone = true;
    for (void* b : blocks) ::operator delete(b);
  }
};
inline thread_local PoolFreeList t_pool;

inline void* pool_block_allocate() {
  if (t_pool_gone) return ::operator new(kPoolBlock);
  auto& fl = t_pool.blocks;  // one trip through the thread_local's init check
  if (fl.empty()) return ::operator new(kPoolBlock);
  void* b = fl.back();
  fl.pop_back();
  return b;
}

inline void pool_block_free(void* p) noexcept {
  if (t_pool_gone) return ::operator delete(p);
  auto& fl = t_pool.blocks;
  if (fl.size() >= kPoolKeep) return ::operator delete(p);
  fl.push_back(p);
}

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n != 1 || sizeof(T) > kPoolBlock) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(pool_block_allocate());
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n != 1 || sizeof(T) > kPoolBlock) return ::operator delete(p);
    pool_block_free(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

}  // namespace podnet::detail
