#include "transport/request.h"

#include "base/futex.h"

namespace podnet::detail {

void RequestState::complete(Status status) {
  std::function<void(const Status&)> cb;
  {
    std::lock_guard lk(mu_);
    if (completing_) return;
    completing_ = true;
    status_ = std::move(status);
    cb = std::move(callback_);
  }
  // The callback runs before the request reads as done: a waiter that returns has seen it.
  if (cb) cb(status_);
  done_.store(1, std::memory_order_seq_cst);
  // Most completions have nobody asleep on them: skip the system call.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&done_);
}

void RequestState::part_done(const Status& status) {
  if (!status.ok()) {
    std::lock_guard lk(mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  if (parts_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
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
  {
    std::lock_guard lk(mu_);
    if (!completing_) {
      callback_ = std::move(cb);
      return;
    }
  }
  cb(status_);  // status_ no longer changes once completing_ is set
}

void RequestState::block_for(int64_t timeout_ns) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (!done()) futex_wait(&done_, 0, timeout_ns);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace podnet::detail
