// cpu_pingpong: the round trip of one cache line between two CPUs, in nanoseconds. The
// comparison scripts run it before and after each tool's run: on a shared VM the time to
// hand a line from one vCPU to another switches between modes for tens of seconds at a time
// (measured on the 2-vCPU AMD VM of 2026-12-07: 480-515 ns against 96-126 ns), and small
// shared-memory collectives follow it, whichever tool runs.
//   cpu_pingpong [ROUNDS [CPU_A CPU_B]]   (default 100000 rounds, the first two usable CPUs)
// Prints {"rt_ns": X, "cpus": [A, B]}, or {"rt_ns": null, ...} with fewer than two CPUs.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

alignas(64) std::atomic<long> ball{0};

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 100000;
  std::vector<int> cpus;
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  if (argc > 3) cpus = {std::atoi(argv[2]), std::atoi(argv[3])};
  if (rounds <= 0 || cpus.size() < 2) {
    std::printf("{\"rt_ns\": null, \"cpus\": []}\n");
    return rounds <= 0 ? 2 : 0;
  }
  if (!pin(cpus[0])) {
    std::fprintf(stderr, "cpu_pingpong: cannot run on CPU %d\n", cpus[0]);
    return 1;
  }
  bool other_pinned = true;
  std::thread other([&] {
    other_pinned = pin(cpus[1]);
    for (long i = 0; i < rounds; ++i) {
      while (ball.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; ++i) {
    ball.store(2 * i + 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  other.join();
  if (!other_pinned) {
    std::fprintf(stderr, "cpu_pingpong: cannot run on CPU %d\n", cpus[1]);
    return 1;
  }
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(rounds);
  std::printf("{\"rt_ns\": %.1f, \"cpus\": [%d, %d]}\n", ns, cpus[0], cpus[1]);
  return 0;
}
