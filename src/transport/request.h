// The shared state behind a podnet::Request. Transports complete it; users test/wait on it.
// Thread-safety: complete() may race with wait()/on_complete() from any thread; the first
// complete() wins and later ones are ignored.
#pragma once

#include <podnet/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

namespace podnet::detail {

class ProgressEngine;

class RequestState {
 public:
  RequestState(ProgressEngine* engine, const char* op, uint64_t seq) : engine_(engine), op_(op), seq_(seq) {}

  bool done() const noexcept { return done_.load(std::memory_order_acquire) != 0; }
  // First call wins. Runs the callback (outside any lock), then marks the request done and
  // wakes waiters: once done() is true, the callback has returned.
  void complete(Status status);
  // For operations split into several parts: set the count before posting the parts; each
  // part reports once; the request completes with the first error, when all parts reported.
  void set_parts(int n) noexcept { parts_.store(n, std::memory_order_relaxed); }
  void part_done(const Status& status);

  Status status() const;
  void on_complete(std::function<void(const Status&)> cb);
  // Blocks up to timeout_ns for completion (no progress is driven here).
  void block_for(int64_t timeout_ns);

  ProgressEngine* engine() const noexcept { return engine_; }
  const char* op() const noexcept { return op_; }
  // A write, write_notify or read: completes on the target's reply.
  bool one_sided() const noexcept {
    const std::string_view o(op_);
    return o == "write" || o == "write_notify" || o == "read";
  }
  uint64_t seq() const noexcept { return seq_; }

  // Results, written before complete() and read after done().
  size_t bytes = 0;
  uint64_t tag = 0;
  uint64_t imm = 0;

 private:
  ProgressEngine* engine_;
  const char* op_;
  uint64_t seq_;
  std::atomic<uint32_t> done_{0};
  std::atomic<uint32_t> sleepers_{0};  // threads inside block_for: complete() wakes only if any
  std::atomic<int> parts_{1};
  // complete() claims the request with one exchange and takes mu_ only when a callback was
  // registered (most requests have none): a Dekker pair, completing_ against has_callback_.
  std::atomic<bool> completing_{false};    // complete() claimed the request
  std::atomic<bool> status_ready_{false};  // ... and status_ is written
  std::atomic<bool> has_callback_{false};
  std::atomic<bool> part_failed_{false};  // first_error_ is set (part_done locks only then)
  mutable std::mutex mu_;  // guards first_error_ and callback_
  Status status_;
  Status first_error_;
  std::function<void(const Status&)> callback_;
};

// A new request. Its memory comes from a small per-thread free list (a request per
// operation showed up in latency profiles as malloc + free).
std::shared_ptr<RequestState> make_request(ProgressEngine* engine, const char* op, uint64_t seq);

}  // namespace podnet::detail
