// Single-thread memcpy bandwidth, the ceiling for a one-copy shared-memory transfer on this
// host: for each size, copies between two separate, pre-touched buffers `iters` times and
// prints one JSON line {"bytes":N,"gbytes_per_s":X} (X counts each byte once: copied bytes
// per second, as `podnet bench p2p` reports payload bytes per second).
//   usage: memcpy_bw ITERS SIZE...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: memcpy_bw ITERS SIZE...\n");
    return 2;
  }
  const long iters = std::atol(argv[1]);
  for (int i = 2; i < argc; ++i) {
    const size_t n = std::strtoull(argv[i], nullptr, 10);
    std::vector<char> a(n, 1), b(n, 2);
    for (long w = 0; w < 3; ++w) std::memcpy(b.data(), a.data(), n);  // warm-up
    auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < iters; ++k) {
      std::memcpy(b.data(), a.data(), n);
      a[k % n] = static_cast<char>(k);  // keep the copy from being optimised away
      asm volatile("" ::"r"(b.data()) : "memory");
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"bytes\":%zu,\"gbytes_per_s\":%.3f}\n", n, static_cast<double>(n) * iters / s / 1e9);
  }
  return 0;
}
