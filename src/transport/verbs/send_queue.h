// Send-queue bookkeeping for a queue pair. Pure (no verbs types), so it is unit-tested on
// hosts without RDMA.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace podnet::verbs {

// Send-queue accounting with selective signaling (guarded by the endpoint's lock). An RC send
// queue completes in order, so a signaled completion retires the unsignaled run before it too.
//  - Inline messages need no completion of their own: they are posted unsignaled except every
//    `every`-th (PODNET_VERBS_SIGNAL_EVERY; or when the queue is nearly full).
//  - RDMA chunks (`posted(false, wr_id)`) do: the caller waits for them. One goes unsignaled
//    only while a signaled work request is already in flight and the queue holds at least
//    kShallow work requests (`want_signal_rdma`); its wr_id is handed back by the completion
//    that retires it. When the last signaled one completes and chunks are still unretired
//    behind it, `needs_flush()` asks for a signaled work request (an empty RDMA write) to
//    retire them. One CQE per 16 chunks in a stream by default, as perftest's `--cq-mod`, and
//    one per chunk when a few go at a time: an unsignaled chunk behind one signaled one (a
//    write ping-pong that reaps each write a round trip later) would otherwise cost a flush,
//    a whole extra work request on the wire, nearly every time.
class SendQueueCount {
 public:
  static constexpr int kSignalEvery = 16;  // the default
  static constexpr int kShallow = 4;       // fewer work requests in flight: chunks are signaled
  explicit SendQueueCount(int depth, int every = kSignalEvery) : depth_(depth), every_(every) {}
  int used() const { return used_; }
  bool full() const { return used_ >= depth_; }
  bool want_signal() const { return run_ + 1 >= every_ || used_ + 2 >= depth_; }
  bool want_signal_rdma() const { return runs_.empty() || used_ < kShallow || want_signal(); }
  // Unretired chunks wait behind no signaled work request. (A flush takes the last free slot
  // if need be: `want_signal()` kept one.)
  bool needs_flush() const { return runs_.empty() && run_ids_ > 0; }
  // Work requests in flight and none of them signaled: nothing will report them done.
  bool unsignaled_only() const { return used_ > 0 && runs_.empty(); }
  // `retire_id` != 0: the wr_id the retiring completion hands back (unsignaled only).
  void posted(bool signaled, uint64_t retire_id = 0) {
    ++used_;
    if (!signaled) {
      ++run_;
      if (retire_id != 0) {
        ids_.push_back(retire_id);
        ++run_ids_;
      }
      return;
    }
    runs_.push_back({run_, run_ids_});
    run_ = run_ids_ = 0;
  }
  // A signaled work request's completion: appends the wr_ids it retired, oldest first.
  void completed(std::vector<uint64_t>& retired) {
    Run before{};
    if (!runs_.empty()) {
      before = runs_.front();
      runs_.pop_front();
    }
    used_ -= 1 + before.all;
    for (int i = 0; i < before.ids && !ids_.empty(); ++i) {
      retired.push_back(ids_.front());
      ids_.pop_front();
    }
  }

 private:
  struct Run {
    int all = 0;  // unsignaled work requests before a signaled one
    int ids = 0;  // of those, the ones with a wr_id to hand back
  };
  int depth_, every_;
  int used_ = 0;
  int run_ = 0, run_ids_ = 0;  // unsignaled work requests since the last signaled one
  std::deque<Run> runs_;       // per signaled work request in flight: the run before it
  std::deque<uint64_t> ids_;   // wr_ids of unsignaled chunks, in post order
};

}  // namespace podnet::verbs
