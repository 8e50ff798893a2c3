#include "transport/request.h"

#include "base/clock.h"
#include "base/futex.h"
#include "transport/block_pool.h"

namespace podnet::detail {

std::shared_ptr<RequestState> make_request(ProgressEngine* engine, const char* op, uint64_t seq) {
  static_assert(sizeof(RequestState) + 64 <= kPoolBlock, "a request (with its control block) must fit a pool block");
  return std::allocate_shared<RequestState>(PoolAllocator<RequestState>(), engine, op, seq);
}

void RequestState::complete(Status status) {
  if (completing_.exchange(true, std::memory_order_seq_cst)) return;  // first call wins
  status_ = std::move(status);
  status_ready_.store(true, std::memory_order_release);
  // The callback runs before the request reads as done: a waiter that returns has seen it.
  if (has_callback_.load(std::memory_order_seq_cst)) {
    std::function<void(const Status&)> cb;
    {
      std::lock_guard lk(mu_);
      cb = std::move(callback_);
      callback_ = nullptr;
    }
    if (cb) cb(status_);
  }
  done_.store(1, std::memory_order_seq_cst);
  // Most completions have nobody asleep on them: skip the system call.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&done_);
}

void RequestState::part_done(const Status& status) {
  if (!status.ok()) {
    std::lock_guard lk(mu_);
    if (first_error_.ok()) first_error_ = status;
    part_failed_.store(true, std::memory_order_relaxed);  // published by the fetch_sub below
  }
  if (parts_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Every part's flag store happened before its fetch_sub, which this one acquired.
    if (!part_failed_.load(std::memory_order_relaxed)) {
      complete(Status::Ok());
      return;
    }
    Status st;
    {
      std::lock_guard lk(mu_);
      st = first_error_;
    }
    complete(std::move(st));
  }
}

Status RequestState::status() const {
  if (!done()) return Status::Internal("{} seq {}: status read before completion", op_, seq_);
  // complete() wrote status_ before the release store of done_ (acquired by done()), and
  // nothing writes it after: no lock (this is on every wait's return path).
  return status_;
}

void RequestState::on_complete(std::function<void(const Status&)> cb) {
  std::function<void(const Status&)> run;
  {
    std::lock_guard lk(mu_);
    callback_ = std::move(cb);
    has_callback_.store(true, std::memory_order_seq_cst);
    // Not claimed yet: complete() will see has_callback_ and run it.
    if (!completing_.load(std::memory_order_seq_cst)) return;
    // Claimed: complete() may have looked at has_callback_ before we set it. Whoever takes
    // the callback from under mu_ runs it.
    run = std::move(callback_);
    callback_ = nullptr;
  }
  if (!run) return;
  while (!status_ready_.load(std::memory_order_acquire)) cpu_relax();  // complete() is writing it
  run(status_);
}

void RequestState::block_for(int64_t timeout_ns) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (!done()) futex_wait(&done_, 0, timeout_ns);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace podnet::detail
