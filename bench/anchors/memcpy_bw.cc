// Single-thread memcpy bandwidth, the ceiling for a one-copy shared-memory transfer on this
// host: for each size, copies between two separate, pre-touched buffers `iters` times and
// prints one JSON line {"bytes":N,"gbytes_per_s":X} (X counts each byte once: copied bytes
// per second, as `podnet bench p2p` reports payload bytes per second).
//   usage: memcpy_bw [--hugepages] ITERS SIZE...
// --hugepages: both buffers on 2 MiB transparent huge pages (madvise), as `podnet bench p2p
// --hugepages` places its buffers.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kHuge = 2u << 20;

// A buffer of n bytes filled with `fill`; on huge pages when asked (2 MiB-aligned, advised
// before the first touch so that the touch faults in huge pages).
char* buffer(size_t n, bool huge, char fill) {
  const size_t len = huge ? (n + kHuge - 1) / kHuge * kHuge : n;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHuge : 64, len) != 0) return nullptr;
  if (huge && madvise(p, len, MADV_HUGEPAGE) != 0) {
    std::perror("memcpy_bw: madvise(MADV_HUGEPAGE)");
    std::exit(1);
  }
  std::memset(p, fill, len);
  return static_cast<char*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  const bool huge = argc > 1 && std::strcmp(argv[1], "--hugepages") == 0;
  if (huge) ++first;
  if (argc - first < 2) {
    std::fprintf(stderr, "usage: memcpy_bw [--hugepages] ITERS SIZE...\n");
    return 2;
  }
  const long iters = std::atol(argv[first]);
  for (int i = first + 1; i < argc; ++i) {
    const size_t n = std::strtoull(argv[i], nullptr, 10);
    if (n == 0) {
      std::fprintf(stderr, "memcpy_bw: size '%s' is not a positive number of bytes\n", argv[i]);
      return 2;
    }
    char* a = buffer(n, huge, 1);
    char* b = buffer(n, huge, 2);
    if (a == nullptr || b == nullptr) {
      std::fprintf(stderr, "memcpy_bw: cannot allocate two buffers of %zu bytes\n", n);
      return 1;
    }
    for (long w = 0; w < 3; ++w) std::memcpy(b, a, n);  // warm-up
    auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < iters; ++k) {
      std::memcpy(b, a, n);
      a[k % n] = static_cast<char>(k);  // keep the copy from being optimised away
      asm volatile("" ::"r"(b) : "memory");
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"bytes\":%zu,\"gbytes_per_s\":%.3f}\n", n, static_cast<double>(n) * iters / s / 1e9);
    std::free(a);
    std::free(b);
  }
  return 0;
}
