// A lock for critical sections of a few dozen instructions on the message path (the tag
// matcher, a shared-memory channel's producer and consumer sides). Uncontended it costs one
// atomic exchange to lock and a plain store to unlock, where std::mutex calls into
// pthread_mutex_lock/unlock (~30 instructions each and a second atomic operation, measured
// with callgrind). Contended, a waiter spins a little and then yields the core, so a holder
// that was preempted on an oversubscribed host gets to run and release it. Never hold it
// across a system call or a callback. Satisfies Lockable (std::lock_guard, std::unique_lock
// with std::try_to_lock).
#pragma once

#include <sched.h>

#include <atomic>

#include "base/clock.h"

namespace podnet {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) cpu_relax();
        else sched_yield();
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace podnet
