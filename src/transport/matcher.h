// Tag matching for two-sided messages and delivery of write_notify immediates, per peer.
// Messages match posted receives in arrival order; a message that arrives before its
// receive is kept as "unexpected" (eager: its payload; rendezvous: only its announcement).
// Thread-safety: all methods lock internally; callers never hold the lock.
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "base/spinlock.h"

namespace podnet::detail {

class RequestState;

struct PostedRecv {
  std::byte* buf = nullptr;
  size_t capacity = 0;
  uint64_t tag = 0;
  uint64_t mask = ~0ull;
  std::shared_ptr<RequestState> req;
  bool matches(uint64_t t) const noexcept { return (t & mask) == (tag & mask); }
};

// The bytes of an unexpected eager message. Buffers of at least kPoolMin bytes come from,
// and go back to, a small process-wide pool: a fresh allocation that large is fresh
// pages (glibc maps it, or trims it back), and faulting them in while recv() copies into
// them cost more than the copy (a sender running ahead of its receiver with 64 KiB eager
// messages over loopback tcp). Up to kInline bytes live in the object itself: a sender
// running ahead of its receiver makes nearly every small message unexpected (94 % of an
// 8 B broadcast's on 4 ranks), and a heap buffer per message was a malloc and a free
// each. Only the first `size()` bytes are meaningful.
class Payload {
 public:
  static constexpr size_t kPoolMin = 32 * 1024;
  static constexpr size_t kInline = 64;
  Payload() = default;
  Payload(const Payload&) = delete;
  Payload& operator=(const Payload&) = delete;
  ~Payload() { release(); }
  void resize(size_t n);
  void assign(const std::byte* first, const std::byte* last) {
    resize(static_cast<size_t>(last - first));
    if (size_ > 0) std::memcpy(data(), first, size_);
  }
  std::byte* data() noexcept { return buf_ != nullptr ? buf_.get() : inline_; }
  const std::byte* data() const noexcept { return buf_ != nullptr ? buf_.get() : inline_; }
  size_t size() const noexcept { return size_; }

 private:
  void release();
  std::unique_ptr<std::byte[]> buf_;  // null: the bytes are in inline_
  size_t size_ = 0, capacity_ = kInline;
  std::byte inline_[kInline];
};

struct UnexpectedMsg {
  uint64_t tag = 0;
  size_t length = 0;
  bool rendezvous = false;  // only announced; the sender waits for a clear-to-send
  uint64_t rdv_id = 0;      // sender's message id (rendezvous)
  bool split = false;       // shm: both sides copy half (see shm/endpoint.h)
  Payload data;  // eager payload
  bool complete = false;    // eager payload fully received
  std::optional<PostedRecv> attached;  // a receive that matched while the payload arrived
};

// A new unexpected message, from the per-thread block pool (block_pool.h).
std::shared_ptr<UnexpectedMsg> make_unexpected();

class TagMatcher {
 public:
  // Incoming message header: returns the posted receive it matches (removed from the posted
  // queue), or nullptr after queueing `msg` as unexpected.
  std::optional<PostedRecv> match_incoming(const std::shared_ptr<UnexpectedMsg>& msg);
  // The same, but the unexpected message is only built (make()) when no receive matches: the
  // common case of a posted receive allocates nothing. make() runs under the lock.
  template <typename Make>
  std::optional<PostedRecv> match_or_queue(uint64_t tag, Make&& make) {
    std::lock_guard lk(mu_);
    if (auto r = take_posted(tag)) return r;
    unexpected_.push_back(make());
    return std::nullopt;
  }
  // Eager payload of an unexpected message finished arriving. Returns a receive that
  // attached meanwhile (the caller copies and completes it).
  std::optional<PostedRecv> finish_unexpected(UnexpectedMsg& msg);
  // User posts a receive: returns a matching unexpected message (removed from the queue) or
  // nullptr after queueing the receive. If the message is still arriving, the receive is
  // attached to it and nullptr is returned. After fail(), a receive with no queued message
  // completes with the failure. `recv` is moved from when it is queued or attached, and left
  // as it was when a message is returned (no reference-count traffic on the common path).
  std::shared_ptr<UnexpectedMsg> post(PostedRecv& recv);

  // Notifications (write_notify immediates).
  // An immediate arrived: returns the posted request it belongs to, its imm() set, for the
  // caller to complete (or nullptr after queueing the immediate).
  std::shared_ptr<RequestState> notify_incoming(uint64_t imm);
  // The user posts a recv_notify: completes it at once with a queued immediate (or with the
  // failure of a failed peer), else queues it.
  void post_notify(std::shared_ptr<RequestState> req);

  // The peer failed: every posted receive and notification completes with `status`;
  // later posts fail unless data that already arrived satisfies them.
  void fail(const Status& status);
  // Removes the posted receives whose own tag matches (tag, mask), and those attached to a
  // message still arriving (that message stays queued as unexpected), and completes them
  // with kCancelled. Returns how many.
  size_t cancel(uint64_t tag, uint64_t mask);

 private:
  std::optional<PostedRecv> take_posted(uint64_t tag);  // with mu_ held

  SpinLock mu_;  // held for a few dozen instructions per message
  std::deque<PostedRecv> posted_;
  std::deque<std::shared_ptr<UnexpectedMsg>> unexpected_;
  std::deque<std::shared_ptr<RequestState>> posted_notify_;
  std::deque<uint64_t> unexpected_notify_;
  Status failed_;
};

// Copies a completed eager message into a receive and completes it (truncation is an error).
void deliver_eager(const PostedRecv& recv, const std::byte* data, size_t length, uint64_t tag);

}  // namespace podnet::detail
