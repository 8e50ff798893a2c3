// Throwaway experiment (bench/results/experiments-2026-12-05/README.md): vmsplice + read against
// process_vm_readv and memcpy. Usage: vs BYTES PIPE_BYTES ITERS
#include <fcntl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
using clk = std::chrono::steady_clock;
int main(int argc, char** argv) { setvbuf(stdout, 0, _IONBF, 0);
  size_t len = argc > 1 ? strtoull(argv[1], 0, 0) : (1 << 20);
  size_t pipesz = argc > 2 ? strtoull(argv[2], 0, 0) : (1 << 20);
  int iters = argc > 3 ? atoi(argv[3]) : 2000;
  int p[2]; pipe(p);
  int got = fcntl(p[1], F_SETPIPE_SZ, (int)pipesz);
  int sync1[2], sync2[2]; pipe(sync1); pipe(sync2);
  char* src = (char*)mmap(0, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  memset(src, 1, len);
  pid_t pid = fork();
  if (pid == 0) {  // receiver
    char* dst = (char*)mmap(0, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    memset(dst, 0, len);
    // vmsplice
    for (int round = 0; round < 2; ++round) {
      char c; read(sync1[0], &c, 1);
      auto t0 = clk::now();
      for (int i = 0; i < iters; ++i) {
        size_t done = 0;
        while (done < len) { ssize_t n = read(p[0], dst + done, len - done); if (n <= 0) { perror("read"); _exit(1);} done += n; }
      }
      double s = std::chrono::duration<double>(clk::now() - t0).count();
      printf("vmsplice+read %zu B pipe %d: %.2f GB/s\n", len, got, len * (double)iters / s / 1e9);
      write(sync2[1], "x", 1);
    }
    // process_vm_readv from parent
    pid_t pp = getppid();
    for (int round = 0; round < 2; ++round) {
      auto t0 = clk::now();
      for (int i = 0; i < iters; ++i) {
        iovec l{dst, len}, r{src, len};
        if (process_vm_readv(pp, &l, 1, &r, 1, 0) != (ssize_t)len) { perror("pvr"); _exit(1); }
      }
      double s = std::chrono::duration<double>(clk::now() - t0).count();
      printf("process_vm_readv %zu B: %.2f GB/s\n", len, len * (double)iters / s / 1e9);
    }
    std::vector<char> a(len, 1);
    for (int round = 0; round < 2; ++round) {
      auto t0 = clk::now();
      for (int i = 0; i < iters; ++i) { memcpy(dst, src, len); asm volatile("":::"memory"); }
      double s = std::chrono::duration<double>(clk::now() - t0).count();
      printf("memcpy %zu B: %.2f GB/s\n", len, len * (double)iters / s / 1e9);
    }
    _exit(0);
  }
  for (int round = 0; round < 2; ++round) {
    write(sync1[1], "x", 1);
    for (int i = 0; i < iters; ++i) {
      size_t done = 0;
      while (done < len) { iovec v{src + done, len - done}; ssize_t n = vmsplice(p[1], &v, 1, 0); if (n <= 0) { perror("vmsplice"); return 1;} done += n; }
    }
    char c; read(sync2[0], &c, 1);
  }
  waitpid(pid, 0, 0);
}
