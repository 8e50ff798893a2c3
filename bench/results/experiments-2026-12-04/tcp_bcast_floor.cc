// The floor of a small broadcast over loopback TCP: N processes, a full mesh of TCP_NODELAY
// connections, ITERS back-to-back broadcasts of B bytes from rank 0 (the way podnet bench
// coll and mpi_coll_bench time them: loop time / ITERS, the largest over the ranks).
//   tcp_bcast_floor N B ITERS TREE WAIT
// TREE: binomial (podnet's tree: vr sends to vr+mask for the masks below its lowest set bit,
//       largest first) | linear (the root sends to everyone) | chain (r -> r+1)
// WAIT: block (blocking recv: sleep until the data is there) | spin (non-blocking recv in a
//       loop) | spinyield (sched_yield after every empty recv)
// PIN=1 binds rank r to CPU r*C/N (podnet run's placement with C < N CPUs); default unbound.
// Build: g++ -O2 -o tcp_bcast_floor tcp_bcast_floor.cc
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s N BYTES ITERS binomial|linear|chain block|spin|spinyield\n", argv[0]);
    return 2;
  }
  const int n = atoi(argv[1]);
  const size_t bytes = strtoull(argv[2], nullptr, 0);
  const int iters = atoi(argv[3]);
  const std::string tree = argv[4], wait = argv[5];
  const int base = 21000 + (getpid() % 4000) * 8;
  auto* times = static_cast<double*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<int> ls(n);
  for (int r = 0; r < n; r++) {
    ls[r] = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls[r], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    a.sin_port = htons(base + r);
    if (bind(ls[r], (sockaddr*)&a, sizeof a) != 0) { perror("bind"); return 1; }
    listen(ls[r], 16);
  }
  int me = 0;
  std::vector<pid_t> kids;
  for (int r = 1; r < n; r++) {
    pid_t p = fork();
    if (p == 0) { me = r; kids.clear(); break; }
    kids.push_back(p);
  }
  if (getenv("PIN") && atoi(getenv("PIN"))) {
    int c = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(c >= n ? me : me * c / n, &s);
    sched_setaffinity(0, sizeof s, &s);
  }
  std::vector<int> fd(n, -1);
  for (int p = 0; p < me; p++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    a.sin_port = htons(base + p);
    while (connect(s, (sockaddr*)&a, sizeof a) != 0) usleep(1000);
    if (write(s, &me, 4) != 4) return 1;
    fd[p] = s;
  }
  for (int k = me + 1; k < n; k++) {
    int s = accept(ls[me], nullptr, nullptr), who = -1;
    if (read(s, &who, 4) != 4) return 1;
    fd[who] = s;
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    int one = 1;
    setsockopt(fd[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (wait != "block") fcntl(fd[p], F_SETFL, O_NONBLOCK);
  }
  // parent and children in this broadcast's tree
  int parent = -1;
  std::vector<int> children;
  if (tree == "binomial") {
    int mask = 1;
    while (mask < n) {
      if (me & mask) { parent = me - mask; break; }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (me + mask < n) children.push_back(me + mask);
  } else if (tree == "linear") {
    if (me == 0) for (int p = 1; p < n; p++) children.push_back(p);
    else parent = 0;
  } else {
    if (me > 0) parent = me - 1;
    if (me + 1 < n) children.push_back(me + 1);
  }
  std::vector<char> buf(bytes + 1, 1);
  auto recv_all = [&](int s) {
    size_t got = 0;
    while (got < bytes) {
      ssize_t r = recv(s, buf.data() + got, bytes - got, 0);
      if (r > 0) { got += r; continue; }
      if (r == 0) exit(1);
      if (wait == "spinyield") sched_yield();
    }
  };
  auto send_all = [&](int s) {
    size_t put = 0;
    while (put < bytes) {
      ssize_t w = send(s, buf.data() + put, bytes - put, MSG_NOSIGNAL);
      if (w > 0) put += w;
      else if (w < 0 && errno != EAGAIN) exit(1);
    }
  };
  double t0 = 0;
  const int warm = iters / 10 + 1;
  for (int it = -warm; it < iters; it++) {
    if (it == 0) t0 = now_us();
    if (parent >= 0) recv_all(fd[parent]);
    for (int c : children) send_all(fd[c]);
  }
  times[me] = (now_us() - t0) / iters;
  if (me != 0) return 0;
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  double mx = 0;
  for (int r = 0; r < n; r++) mx = times[r] > mx ? times[r] : mx;
  printf("{\"n\": %d, \"bytes\": %zu, \"tree\": \"%s\", \"wait\": \"%s\", \"pin\": %d, \"time_us\": %.3f}\n", n, bytes,
         tree.c_str(), wait.c_str(), getenv("PIN") ? atoi(getenv("PIN")) : 0, mx);
  return 0;
}
