// Send-queue bookkeeping for a queue pair. Pure (no verbs types), so it is unit-tested on
// hosts without RDMA.
#pragma once

#include <deque>

namespace podnet::verbs {

// Send-queue accounting with selective signaling (guarded by the endpoint's lock). Inline
// messages are posted unsignaled except every kSignalEvery-th (or when the queue is nearly
// full): an RC send queue completes in order, so a signaled completion retires the
// unsignaled run before it too.
class SendQueueCount {
 public:
  static constexpr int kSignalEvery = 16;
  explicit SendQueueCount(int depth) : depth_(depth) {}
  int used() const { return used_; }
  bool full() const { return used_ >= depth_; }
  bool want_signal() const { return run_ + 1 >= kSignalEvery || used_ + 2 >= depth_; }
  void posted(bool signaled) {
    ++used_;
    if (!signaled) return void(++run_);
    runs_.push_back(run_);
    run_ = 0;
  }
  void completed() {  // a signaled work request's completion
    int before = 0;
    if (!runs_.empty()) {
      before = runs_.front();
      runs_.pop_front();
    }
    used_ -= 1 + before;
  }

 private:
  int depth_;
  int used_ = 0;
  int run_ = 0;           // unsignaled work requests since the last signaled one
  std::deque<int> runs_;  // per signaled work request in flight: the unsignaled run before it
};

}  // namespace podnet::verbs
