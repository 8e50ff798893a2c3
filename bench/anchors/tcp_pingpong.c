// A plain-socket TCP ping-pong on 127.0.0.1: the floor that any library over loopback TCP
// sits on. Two processes (fork), one connection, TCP_NODELAY; the client sends SIZE bytes,
// the server echoes them. Each side either spins on a non-blocking recv() (--spin, what
// podnet's and Open MPI's waits do first) or blocks in recv() (--block, what sockperf's
// ping-pong does). With --exchange both sides send at once and then receive (the pattern of
// a 2-rank allreduce), and the time per exchange is reported instead of RTT/2. --poll (with
// --spin) spins on a zero-timeout poll() until the socket is readable and only then calls
// recv(): poll() does not take the socket lock that an empty recv() takes (an experiment,
// docs/performance.md: it measured slower here).
//
//   cc -O2 -o tcp_pingpong tcp_pingpong.c
//   tcp_pingpong [--spin|--block] [--poll] [--exchange] [-s SIZE] [-n ITERS] [-w WARMUP]
//
// Prints one line: "median_us avg_us" (RTT/2 for the ping-pong, per exchange with
// --exchange), over ITERS timed iterations after WARMUP untimed ones.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

static void send_all(int fd, const char* b, size_t n) {
  while (n > 0) {
    ssize_t r = send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0 && errno != EAGAIN && errno != EINTR) die("send");
    if (r > 0) b += r, n -= (size_t)r;
  }
}

static int poll_first = 0;  // --poll

static void recv_all(int fd, char* b, size_t n, int spin) {
  while (n > 0) {
    if (spin && poll_first) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      while (poll(&p, 1, 0) == 0) {
      }
    }
    ssize_t r = recv(fd, b, n, spin ? MSG_DONTWAIT : 0);
    if (r == 0) {
      fprintf(stderr, "tcp_pingpong: peer closed\n");
      exit(1);
    }
    if (r < 0 && errno != EAGAIN && errno != EINTR) die("recv");
    if (r > 0) b += r, n -= (size_t)r;
  }
}

static int cmp_ll(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int spin = 1, exchange = 0, iters = 100000, warm = 1000;
  size_t size = 8;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--spin")) spin = 1;
    else if (!strcmp(argv[i], "--block")) spin = 0;
    else if (!strcmp(argv[i], "--exchange")) exchange = 1;
    else if (!strcmp(argv[i], "--poll")) poll_first = 1;
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) size = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc) warm = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--spin|--block] [--poll] [--exchange] [-s SIZE] [-n ITERS] [-w WARMUP]\n", argv[0]);
      return 2;
    }
  }
  if (size == 0 || iters <= 0 || warm < 0) {
    fprintf(stderr, "tcp_pingpong: SIZE and ITERS must be positive\n");
    return 2;
  }
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr*)&a, &al))
    die("listen on 127.0.0.1");
  pid_t child = fork();
  if (child < 0) die("fork");
  int server = child != 0, fd;
  if (server) {
    fd = accept(l, NULL, NULL);
  } else {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr*)&a, sizeof a)) die("connect");
  }
  if (fd < 0) die("socket");
  close(l);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char* out = calloc(1, size);
  char* in = calloc(1, size);
  long long* t = malloc(sizeof(long long) * (size_t)iters);
  if (!out || !in || !t) die("malloc");
  for (int i = 0; i < warm + iters; ++i) {
    long long t0 = now_ns();
    if (exchange) {
      send_all(fd, out, size);
      recv_all(fd, in, size, spin);
    } else if (server) {
      recv_all(fd, in, size, spin);
      send_all(fd, in, size);
    } else {
      send_all(fd, out, size);
      recv_all(fd, in, size, spin);
    }
    if (i >= warm) t[i - warm] = now_ns() - t0;
  }
  if (server) {
    int st = 0;
    waitpid(child, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  double sum = 0;
  for (int i = 0; i < iters; ++i) sum += (double)t[i];
  qsort(t, (size_t)iters, sizeof t[0], cmp_ll);
  double div = exchange ? 1000.0 : 2000.0;  // ns -> us; RTT/2 for the ping-pong
  printf("%.3f %.3f\n", (double)t[iters / 2] / div, sum / iters / div);
  return 0;
}
