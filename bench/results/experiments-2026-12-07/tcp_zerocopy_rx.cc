// Loopback TCP_ZEROCOPY_RECEIVE probe: how many bytes does the kernel map instead of copy?
// Sender: send() TOTAL bytes from a page-aligned buffer in CHUNK pieces. Receiver: mmap on the
// socket, getsockopt(TCP_ZEROCOPY_RECEIVE) per round; what it cannot map (recv_skip_hint) is
// read with recv(). Prints mapped vs copied bytes and the time.
#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
int main(int argc, char** argv) {
  const size_t total = (argc > 1 ? atol(argv[1]) : 256) << 20, chunk = 1 << 20;
  const bool zc = argc > 2 ? atoi(argv[2]) : 1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1; setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bind(ls, (sockaddr*)&a, sizeof a); listen(ls, 1);
  socklen_t al = sizeof a; getsockname(ls, (sockaddr*)&a, &al);
  std::thread tx([&] {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    connect(s, (sockaddr*)&a, sizeof a);
    char* buf = (char*)aligned_alloc(4096, chunk); memset(buf, 7, chunk);
    for (size_t sent = 0; sent < total;) { ssize_t n = send(s, buf, std::min(chunk, total - sent), 0); if (n <= 0) break; sent += n; }
    close(s);
  });
  int s = accept(ls, nullptr, nullptr);
  const size_t map_len = 16 << 20;
  void* addr = zc ? mmap(nullptr, map_len, PROT_READ, MAP_SHARED, s, 0) : MAP_FAILED;
  if (zc && addr == MAP_FAILED) { perror("mmap"); }
  char* dst = (char*)aligned_alloc(4096, map_len); memset(dst, 0, map_len);
  size_t mapped = 0, copied = 0, sum = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    size_t skip = map_len;
    if (zc && addr != MAP_FAILED) {
      tcp_zerocopy_receive z{}; z.address = (uint64_t)addr; z.length = map_len;
      socklen_t zl = sizeof z;
      if (getsockopt(s, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &z, &zl) < 0) { perror("zc"); break; }
      if (z.length) { mapped += z.length; for (size_t i = 0; i < z.length; i += 4096) sum += ((char*)addr)[i];
        madvise(addr, z.length, MADV_DONTNEED); }
      skip = z.recv_skip_hint ? z.recv_skip_hint : (z.length ? 0 : map_len);
      if (!skip) continue;
    }
    ssize_t n = recv(s, dst, std::min(skip, map_len), 0);
    if (n <= 0) break;
    copied += n;
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tx.join();
  printf("zc=%d mapped %zu copied %zu bytes in %.3f s: %.1f Gb/s (sum %zu)\n", zc, mapped, copied, dt, (mapped + copied) * 8 / dt / 1e9, sum);
}
