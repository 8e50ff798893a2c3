// What a fresh shared-memory page costs (docs/shm.md "Segments"): a 4 MiB memfd written one
// byte per page (first touch: allocate, zero, map), the same with madvise(MADV_POPULATE_WRITE)
// instead, and a second mapping of already allocated pages read one byte per page or
// populated with MADV_POPULATE_READ. Three rounds.
//   cc -O2 -o populate_cost populate_cost.c && ./populate_cost
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static char* map_new(size_t n, int* fd) {
  *fd = memfd_create("populate", 0);
  if (*fd < 0 || ftruncate(*fd, (off_t)n) != 0) return NULL;
  char* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

int main(void) {
  const size_t n = 4 << 20;
  for (int round = 0; round < 3; ++round) {
    int fa, fb;
    char* a = map_new(n, &fa);
    char* b = map_new(n, &fb);
    if (!a || !b) return perror("memfd"), 1;
    double t0 = now_us();
    for (size_t i = 0; i < n; i += 4096) a[i] = 1;
    double t1 = now_us();
    int r = madvise(b, n, MADV_POPULATE_WRITE);
    double t2 = now_us();
    char* b2 = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fb, 0);
    char* b3 = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fb, 0);
    if (b2 == MAP_FAILED || b3 == MAP_FAILED) return perror("mmap"), 1;
    volatile char s = 0;
    double t3 = now_us();
    for (size_t i = 0; i < n; i += 4096) s += b2[i];
    double t4 = now_us();
    madvise(b3, n, MADV_POPULATE_READ);
    double t5 = now_us();
    printf("4 MiB: write-touch %.0f us, MADV_POPULATE_WRITE %.0f us (rc %d); second mapping: read-touch %.0f us, "
           "MADV_POPULATE_READ %.0f us\n",
           t1 - t0, t2 - t1, r, t4 - t3, t5 - t4);
    munmap(a, n), munmap(b, n), munmap(b2, n), munmap(b3, n), close(fa), close(fb);
  }
  return 0;
}
