// Monotonic clock helpers. Units are in the names.
#pragma once

#include <time.h>

#include <cstdint>

namespace podnet {

// Nanoseconds on clock `id`.
inline int64_t clock_ns(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t now_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }
// The time of the kernel's last tick (CLOCK_MONOTONIC_COARSE): never ahead of now_ns(), up
// to a tick (1-10 ms) behind it, and a quarter of its cost (5 against 19 ns here). For
// stamps that only timeouts of many ticks read (a connection's last input and output).
inline int64_t now_coarse_ns() noexcept { return clock_ns(CLOCK_MONOTONIC_COARSE); }
inline int64_t now_us() noexcept { return now_ns() / 1000; }
inline int64_t now_ms() noexcept { return now_ns() / 1'000'000; }

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace podnet
