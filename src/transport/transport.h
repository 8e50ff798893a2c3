// The transport plug-in interface. A Transport moves bytes between registered memory on two
// hosts; the transfer engine (src/xfer) picks one per peer and adds argument checking and
// error context on top.
//
// Contract for every method of TransportEndpoint:
//   - never blocks (connection set-up and back-pressure are queued, not waited for);
//   - always returns a request; a failure completes it with a Status naming the peer,
//     the operation and its sequence number;
//   - arguments are already validated against the local region by the caller;
//   - thread-safe: may be called from any thread concurrently.
#pragma once

#include <podnet/xfer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/clock.h"

namespace podnet::detail {

// How long a closing context waits for its peers (what it queued to leave, their answers to
// its goodbye) before it fails its endpoints anyway.
inline constexpr int64_t kCloseFlushNs = 2'000'000'000;

// Calls `settled()` every 50 us until it returns true or kCloseFlushNs have passed.
template <typename F>
void wait_to_close(F&& settled) {
  const int64_t until = now_ns() + kCloseFlushNs;
  while (!settled() && now_ns() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

class RequestState;
class RegionState;

struct Capabilities {
  bool one_sided = true;      // write/read without the target's CPU in the user's code path
  bool ordered_messages = true;
  size_t max_message = 0;     // largest single operation; 0: unlimited
};

class TransportEndpoint {
 public:
  virtual ~TransportEndpoint() = default;
  virtual int peer_rank() const noexcept = 0;
  virtual std::string peer_name() const = 0;

  using Req = std::shared_ptr<RequestState>;
  virtual Req write(const RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                    size_t len, const uint64_t* imm) = 0;  // imm != nullptr: write_notify
  virtual Req read(const RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                   size_t len) = 0;
  virtual Req send(const void* buf, size_t len, uint64_t tag) = 0;
  // send(), except that a message that leaves at once may complete without a request
  // object: then it returns null and stores the operation's sequence number in *done_seq.
  virtual Req send_or_done(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq) {
    (void)done_seq;
    return send(buf, len, tag);
  }
  // send(), for a sender that has copying of its own to do while the message moves: the
  // receiver copies all of it (shm: no split copy, which would give the sender half).
  virtual Req send_whole(const void* buf, size_t len, uint64_t tag) { return send(buf, len, tag); }
  // send_or_done() for one step of an exchange (the collectives' sendrecv, rings and
  // all-to-alls), whose receiver posts its receive before or while it sends its own part:
  // such a message seldom arrives unexpected, so tcp sends it eagerly up to a larger size
  // (PODNET_TCP_EXCHANGE_EAGER_MAX) instead of waiting for the receiver's clear-to-send.
  virtual Req send_exchange(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq) {
    return send_or_done(buf, len, tag, done_seq);
  }
  virtual Req recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) = 0;
  virtual Req recv_notify() = 0;
  // Endpoint::cancel_recvs: the posted receives of this peer's matcher.
  virtual size_t cancel_recvs(uint64_t tag, uint64_t mask) = 0;
  virtual Status health() const = 0;
  // Returns once the connections this side opens are established (or failed, or the
  // deadline, CLOCK_MONOTONIC ns, passed: an error naming the peer). Transports that
  // connect synchronously have nothing to wait for.
  virtual Status wait_connected(int64_t deadline_ns) {
    (void)deadline_ns;
    return {};
  }
  // For layers that keep their own order with the peer (the collectives' shared arena): when
  // the peer allocated the memory of `key` (Context::allocate_memory) and this side already
  // maps it, copies `len` bytes between `local` and the peer's address `addr` with memcpy
  // (`read`: from the peer) and returns true, at once. False, with nothing copied, where the
  // transport cannot: no mapping (the first call asks the peer for one, so a later call may
  // succeed), a revoked region, a range outside it, rights it does not grant. Unlike
  // write()/read() this does not wait for earlier operations on the endpoint.
  virtual bool copy_mapped_now(uint64_t key, uint64_t addr, void* local, size_t len, bool read) {
    (void)key, (void)addr, (void)local, (void)len, (void)read;
    return false;
  }
  // Where copy_mapped_now could read, the bytes themselves: a pointer to the peer's `addr`
  // through this side's mapping, which it keeps mapped while the pointer lives. Null where
  // copy_mapped_now(read) would return false. The caller reads while the owner keeps the
  // memory still (its own protocol says when).
  virtual std::shared_ptr<const std::byte> view_mapped(uint64_t key, uint64_t addr, size_t len) {
    (void)key, (void)addr, (void)len;
    return nullptr;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual Capabilities caps() const noexcept = 0;
  // This transport's part of the context's address blob ("tcp=10.0.0.2:4000").
  virtual std::string address() const = 0;
  // Never blocks: returns an endpoint whose first requests wait until it is connected.
  virtual Result<std::shared_ptr<TransportEndpoint>> connect(uint64_t peer_id, int peer_rank,
                                                             std::string_view peer_address) = 0;
  virtual void shutdown() = 0;  // fails outstanding requests with kCancelled, closes sockets
};

}  // namespace podnet::detail
