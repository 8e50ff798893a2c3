// Throwaway experiment (bench/results/experiments-2026-12-05/README.md): memcpy bandwidth from source
// offsets 0 / 16 / 64 / 2048 into a destination at +64 (a heap vector's data against the arena's slots).
#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
int main(int argc, char** argv) {
  size_t len = argc > 1 ? strtoull(argv[1], 0, 0) : (4 << 20);
  int iters = argc > 2 ? atoi(argv[2]) : 200;
  char* a = (char*)mmap(0, len + 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char* b = (char*)mmap(0, len + 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  memset(a, 1, len + 8192); memset(b, 2, len + 8192);
  for (int round = 0; round < 2; ++round)
  for (size_t so : {size_t{0}, size_t{16}, size_t{64}, size_t{2048}}) {
    char* src = a + so; char* dst = b + 64;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) { memcpy(dst, src, len); asm volatile("" ::: "memory"); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("src+%zu dst+64 %zu B: %.2f GB/s\n", so, len, len * (double)iters / s / 1e9);
  }
}
