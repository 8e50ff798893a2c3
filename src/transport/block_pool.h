// Fixed-size blocks for the objects every message allocates (a request, an unexpected
// message): one free list per thread, bounded. A block freed on another thread than the one
// that allocated it joins that thread's list. glibc's per-thread cache keeps 7 chunks per
// size; a sender running ahead of its receiver frees dozens at a time, and the rest went
// through malloc's slow path (unexpected 8 B messages: ~260 instructions each of ~950,
// callgrind, bench/results/experiments-2026-12-04/unexpected_path.cc).
#pragma once

#include <cstddef>
#include <new>

namespace podnet::detail {

inline constexpr size_t kPoolBlock = 512;
void* pool_block_allocate();
void pool_block_free(void* p) noexcept;

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
