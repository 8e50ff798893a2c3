// Cost of one timestamp read on this host, 10^7 reads in a loop (throughput, not latency),
// three rounds: clock_gettime(CLOCK_MONOTONIC) (the vDSO, which itself reads the TSC with an
// ordering instruction), a plain rdtsc (perftest's get_cycles, ucx_perftest's ucs_get_time),
// rdtscp, lfence;rdtsc (the kernel's rdtsc_ordered) and lfence;rdtsc;lfence.
// g++ -O2 -o timer_cost timer_cost.cc && ./timer_cost
#include <time.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>

static inline int64_t ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main() {
  const int n = 10000000;
  volatile uint64_t sink = 0;
  for (int round = 0; round < 3; ++round) {
    int64_t a = ns();
    for (int i = 0; i < n; ++i) sink += ns();
    int64_t b = ns();
    for (int i = 0; i < n; ++i) sink += __rdtsc();
    int64_t c = ns();
    unsigned aux;
    for (int i = 0; i < n; ++i) sink += __rdtscp(&aux);
    int64_t d = ns();
    for (int i = 0; i < n; ++i) {
      _mm_lfence();
      sink += __rdtsc();
    }
    int64_t e = ns();
    for (int i = 0; i < n; ++i) {
      _mm_lfence();
      sink += __rdtsc();
      _mm_lfence();
    }
    int64_t f = ns();
    std::printf("clock_gettime %.1f ns, rdtsc %.1f, rdtscp %.1f, lfence;rdtsc %.1f, lfence;rdtsc;lfence %.1f\n",
                (b - a) / double(n), (c - b) / double(n), (d - c) / double(n), (e - d) / double(n), (f - e) / double(n));
  }
}
