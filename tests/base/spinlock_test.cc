// SpinLock: mutual exclusion under contention (more threads than cores, so holders get
// preempted and waiters must yield), and try_lock never takes a held lock.
#include "base/spinlock.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace podnet {
namespace {

TEST(SpinLock, ExcludesEveryOtherThreadUnderContention) {
  SpinLock mu;
  // A non-atomic read-modify-write of two words: torn or lost updates without exclusion.
  uint64_t a = 0, b = 0;
  constexpr int kThreads = 8, kIters = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < kIters; ++i) {
        std::lock_guard lk(mu);
        uint64_t x = a;
        for (int k = 0; k < 20; ++k) cpu_relax();  // widen the window a missing exclusion would show in
        b = b + 1;
        a = x + 1;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(a, uint64_t{kThreads} * kIters);
  EXPECT_EQ(b, a);
}

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinLock mu;
  ASSERT_TRUE(mu.try_lock());
  bool other = true;
  std::thread([&] { other = mu.try_lock(); }).join();
  EXPECT_FALSE(other);
  mu.unlock();
  std::thread([&] {
    other = mu.try_lock();
    if (other) mu.unlock();
  }).join();
  EXPECT_TRUE(other);
}

}  // namespace
}  // namespace podnet
