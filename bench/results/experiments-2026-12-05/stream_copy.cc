// Copy bandwidth of glibc's memcpy against non-temporal stores (AVX2 and SSE2 loops), a
// destination out of cache (a 64 MiB buffer is rewritten before each of 7 rounds; the
// best round counts); one thread, or N at once (each with its own buffers).
// g++ -O2 -mavx2 -pthread -o stream_copy stream_copy.cc
// ./stream_copy MIB MODE THREADS   (MODE 0 memcpy, 1 AVX2 stream, 2 SSE2 stream)
#include <immintrin.h>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <vector>
#include <thread>
static void nt_copy(void* d, const void* s, size_t n) {
  auto* dp = (__m256i*)d; auto* sp = (const __m256i*)s;
  for (size_t i = 0; i < n / 32; i += 4) {
    __m256i a = _mm256_loadu_si256(sp + i), b = _mm256_loadu_si256(sp + i + 1), c = _mm256_loadu_si256(sp + i + 2), e = _mm256_loadu_si256(sp + i + 3);
    _mm256_stream_si256(dp + i, a); _mm256_stream_si256(dp + i + 1, b); _mm256_stream_si256(dp + i + 2, c); _mm256_stream_si256(dp + i + 3, e);
  }
  _mm_sfence();
}
static void nt_copy16(void* d, const void* s, size_t n) {
  auto* dp = (__m128i*)d; auto* sp = (const __m128i*)s;
  for (size_t i = 0; i < n / 16; i += 4) {
    __m128i a = _mm_loadu_si128(sp + i), b = _mm_loadu_si128(sp + i + 1), c = _mm_loadu_si128(sp + i + 2), e = _mm_loadu_si128(sp + i + 3);
    _mm_stream_si128(dp + i, a); _mm_stream_si128(dp + i + 1, b); _mm_stream_si128(dp + i + 2, c); _mm_stream_si128(dp + i + 3, e);
  }
  _mm_sfence();
}
int main(int argc, char** argv) {
  size_t n = strtoull(argv[1], 0, 0) << 20; int mode = atoi(argv[2]); int threads = atoi(argv[3]);
  auto work = [&](int t, double* out) {
    char* s = (char*)aligned_alloc(4096, n); char* d = (char*)aligned_alloc(4096, n);
    std::vector<char*> bufs; // evict between reps with a big buffer
    memset(s, 1, n); memset(d, 2, n);
    char* ev = (char*)aligned_alloc(4096, 64 << 20); memset(ev, 3, 64 << 20);
    double best = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      memset(ev, rep, 64 << 20);
      auto t0 = std::chrono::steady_clock::now();
      if (mode == 0) memcpy(d, s, n); else if (mode == 1) nt_copy(d, s, n); else nt_copy16(d, s, n);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (us < best) best = us;
    }
    *out = best;
  };
  std::vector<double> r(threads); std::vector<std::thread> th;
  for (int t = 0; t < threads; ++t) th.emplace_back(work, t, &r[t]);
  for (auto& x : th) x.join();
  for (double x : r) printf("%s %zuM: %.0f us %.2f GB/s\n", mode == 2 ? "nt16" : mode ? "nt" : "memcpy", n >> 20, x, n / x / 1e3);
}
