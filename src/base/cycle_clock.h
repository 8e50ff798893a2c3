// A cheap timestamp for timing loops (the benchmarks' per-iteration latencies): the CPU's
// counter where the kernel itself keeps time with it, else CLOCK_MONOTONIC.
//
// perftest (get_cycles) and ucx_perftest (ucs_get_time) time each iteration with the
// time-stamp counter; a clock_gettime() costs more (23.4 against 9.5 ns for rdtsc on the
// AMD EPYC VM, docs/performance.md), and one read's worth of it lands inside every measured
// interval. The counter is used only where the kernel's clocksource is that counter ("tsc"
// on x86, "arch_sys_counter" on aarch64): the kernel has then checked that it runs at a
// constant rate and agrees across CPUs. Ticks convert to nanoseconds at a rate calibrated
// against CLOCK_MONOTONIC when the clock is made.
// Thread-safety: for_benchmarks() is safe from any thread; the clock is immutable once made.
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <string_view>

#include "base/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace podnet {

class CycleClock {
 public:
  enum class Source { kMonotonic, kTsc, kCntvct };

  // The benchmarks' clock, made once per process on first use (~10 ms of calibration):
  // PODNET_BENCH_TIMER auto (the counter where the kernel trusts it, read as perftest's
  // get_cycles and ucx_perftest's ucs_get_time read it: a plain rdtsc), fenced (the same,
  // each read ordered after the instructions before it) or clock (always CLOCK_MONOTONIC);
  // another value is an error that names the variable.
  static Result<const CycleClock*> for_benchmarks();
  // A clock of the given source (kMonotonic where that counter is unavailable here),
  // calibrated for `calibrate_ns` nanoseconds; tests compare sources with it. `fenced`: on
  // x86 an lfence before each rdtsc (the kernel's rdtsc_ordered: the read waits for every
  // earlier instruction, 18.9 against 9.5 ns on the AMD VM); aarch64's read is always
  // preceded by an isb.
  static CycleClock make(Source wanted, int64_t calibrate_ns, bool fenced = false);
  // Whether the kernel keeps time with this machine's counter (its clocksource file).
  static bool counter_trusted();
  // This architecture's counter: kTsc on x86, kCntvct on aarch64, else kMonotonic.
  static constexpr Source native_counter() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return Source::kTsc;
#elif defined(__aarch64__)
    return Source::kCntvct;
#else
    return Source::kMonotonic;
#endif
  }

  uint64_t ticks() const noexcept {
    switch (source_) {
#if defined(__x86_64__) || defined(__i386__)
      case Source::kTsc:
        if (fenced_) _mm_lfence();  // rdtsc after every earlier instruction has completed
        return __rdtsc();
#endif
#if defined(__aarch64__)
      case Source::kCntvct: {
        uint64_t v;
        asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
        return v;
      }
#endif
      default:
        return static_cast<uint64_t>(now_ns());
    }
  }
  double ns(uint64_t ticks) const noexcept { return static_cast<double>(ticks) * ns_per_tick_; }
  double ns_per_tick() const noexcept { return ns_per_tick_; }
  Source source() const noexcept { return source_; }
  bool fenced() const noexcept { return fenced_; }
  // "tsc", "tsc+lfence", "cntvct" or "clock_gettime": what the benchmarks print beside
  // their latencies.
  std::string_view name() const noexcept;

 private:
  Source source_ = Source::kMonotonic;
  double ns_per_tick_ = 1.0;
  bool fenced_ = false;
};

}  // namespace podnet
