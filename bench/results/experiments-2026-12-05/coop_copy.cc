// Two processes: message of S bytes from A (sender buffer sbuf) to B (receiver buffer rbuf).
// MODE 0: B copies all with process_vm_readv. MODE 1: B reads the first half while A writes
// the second half with process_vm_writev. MODE 2: dynamic chunk claiming (CHUNK bytes).
// Sender pinned to CPU 0, receiver to CPU 1; the same two buffers every iteration.
// Build: g++ -O2 -o coop coop_copy.cc; run: ./coop BYTES ITERS MODE [CHUNK].
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
struct Shared { std::atomic<long> go{0}; std::atomic<long> doneA{0}; std::atomic<long> doneB{0}; std::atomic<long> next{0}; };
int main(int argc, char** argv) {
  size_t S = strtoull(argv[1], 0, 0); int N = atoi(argv[2]); int mode = atoi(argv[3]);
  size_t CH = argc > 4 ? strtoull(argv[4], 0, 0) : 262144;
  auto* sh = new (mmap(0, 4096, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0)) Shared;
  char* sbuf = (char*)mmap(0, S, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char* rbuf = (char*)mmap(0, S, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  memset(sbuf, 1, S); memset(rbuf, 2, S);
  pid_t parent = getpid();
  pid_t child = fork();
  bool isA = child != 0;  // parent = sender A, child = receiver B
  pid_t peer = isA ? child : parent;
  if (!isA) { cpu_set_t c; CPU_ZERO(&c); CPU_SET(1, &c); sched_setaffinity(0, sizeof c, &c); }
  else { cpu_set_t c; CPU_ZERO(&c); CPU_SET(0, &c); sched_setaffinity(0, sizeof c, &c); }
  auto copy = [&](size_t off, size_t len) {
    struct iovec l, r;
    if (isA) { l = {sbuf + off, len}; r = {rbuf + off, len}; if (process_vm_writev(peer, &l, 1, &r, 1, 0) != (ssize_t)len) perror("w"); }
    else { l = {rbuf + off, len}; r = {sbuf + off, len}; if (process_vm_readv(peer, &l, 1, &r, 1, 0) != (ssize_t)len) perror("r"); }
  };
  auto t0 = std::chrono::steady_clock::now();
  for (long it = 1; it <= N; ++it) {
    if (isA) { sh->next.store(0); sh->go.store(it); }
    else while (sh->go.load() < it) {}
    if (mode == 0) { if (!isA) copy(0, S); }
    else if (mode == 1) { if (isA) copy(S / 2, S - S / 2); else copy(0, S / 2); }
    else { for (;;) { long c = sh->next.fetch_add(1); size_t off = c * CH; if (off >= S) break; copy(off, std::min(CH, S - off)); } }
    if (isA) { sh->doneA.store(it); while (sh->doneB.load() < it) {} }
    else { sh->doneB.store(it); while (sh->doneA.load() < it) {} }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (isA) { waitpid(child, 0, 0); printf("S=%zu mode=%d chunk=%zu: %.1f GB/s\n", S, mode, CH, S * (double)N / s / 1e9); }
  return 0;
}
