// One shared-memory channel: a memfd segment made by the side that connects, holding a
// request ring (connector -> acceptor) and a reply ring (acceptor -> connector), plus the
// Unix socket the segment's descriptors travelled over, which stays open as the liveness
// signal (a dead peer's socket hangs up at once). Like a TCP connection, a channel carries
// one side's requests and the replies to them; two peers that both connect use two
// channels, so no connection race ever needs resolving.
//
// Nothing is named in /dev/shm: the segment is a memfd passed with SCM_RIGHTS, so it goes
// away with the last process that maps it, however that process ends.
//
// Thread-safety: the producer side (post/drain) is serialised by tx_mu; the consumer side
// by rx_mu, taken with try_lock by whoever polls. Requests are never completed with either
// lock held (completions are handed back to the caller).
#pragma once

#include <podnet/status.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/small_vector.h"
#include "base/spinlock.h"
#include "transport/progress.h"
#include "transport/request.h"
#include "transport/shm/ring.h"

namespace podnet::shm {

// The segment's first page.
struct SegmentHeader {
  static constexpr uint64_t kMagic = 0x706f646e65747368ull;  // "podnetsh"
  // 2: ring control words 128 bytes apart; 3: records published by their first word (no
  // head index); 4: large sends without cross-memory attach announce themselves (kRts with
  // kRing) and wait for their receive; 5: bulk areas for payloads from kBulkMin (ring.h)
  static constexpr uint32_t kVersion = 5;
  uint64_t magic;
  uint32_t version;
  uint32_t ring_bytes;
  uint32_t bulk_bytes;                                     // 0: no bulk areas
  alignas(kCacheLine) std::atomic<uint64_t> heartbeat[2];  // [0] connector, [1] acceptor
};

// The messages on a channel's Unix socket (SOCK_SEQPACKET: one message per send).
struct Hello {
  enum Kind : uint32_t { kHello = 1, kReply = 2, kBye = 3 };
  uint64_t magic = SegmentHeader::kMagic;
  uint32_t version = SegmentHeader::kVersion;
  uint32_t kind = kHello;
  uint64_t ctx_id = 0;
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t probe_addr = 0;  // an address in the sender's mapping of the segment (kMagic)
  uint32_t cma = 0;         // reply: the acceptor reached the probe address
  uint32_t pad = 0;
};
// Sends `h` with up to two descriptors; receives one message and up to two descriptors
// (-1 where none came). Both are non-blocking.
Status send_hello(int sock, const Hello& h, const int* fds, int nfds);
Result<Hello> recv_hello(int sock, int fds[2]);
// Copies len bytes between this process and `pid` with one kernel copy (cross-memory attach):
// into_peer: local -> peer (process_vm_writev), else peer -> local (process_vm_readv).
Status cross_copy(pid_t pid, std::byte* local, uint64_t remote, size_t len, bool into_peer);
// Whether this process can read the 8 bytes at `addr` in `pid` (rank `peer`) and they equal
// `expect`; a refusal is explained in the log (explain_cma_refusal, ptracer.h).
bool probe_cma(pid_t pid, uint64_t addr, uint64_t expect, const std::string& peer);

// An outgoing operation waiting for ring space: one record, or a payload split over several
// fragment records (kFirst/kLast flags, aux = offset).
struct OutOp {
  RecHdr hdr{};
  const std::byte* src = nullptr;  // payload (the user's buffer or `owned`)
  size_t len = 0;
  size_t done = 0;
  bool fragments = false;          // split `len` into fragments (else one record, payload len)
  std::shared_ptr<detail::RequestState> on_emitted;  // completes when the last byte is in the ring
  std::shared_ptr<void> keep;      // holds a pinned region or a buffer while queued
  std::string owned;
};

// Requests to complete once the channel's locks are released. The first few live inline
// (SmallVector): a send completes on every post, and a heap allocation per send showed up in
// profiles.
class Completions {
 public:
  void push_back(std::shared_ptr<detail::RequestState> r) { reqs_.emplace_back(std::move(r)); }
  bool empty() const noexcept { return reqs_.empty(); }
  template <typename F>
  void drain(F&& fn) {
    reqs_.for_each([&](std::shared_ptr<detail::RequestState>& r) { fn(std::move(r)); });
    reqs_.clear();
  }

 private:
  SmallVector<std::shared_ptr<detail::RequestState>, 4> reqs_;
};

class Channel {
 public:
  enum class Role { kConnector, kAcceptor };
  ~Channel();

  // Connector: makes the segment, connects to the peer's socket and sends the hello.
  // Rings of `ring_bytes` and bulk areas of `bulk_bytes` (0: none; else at least kMinBulk).
  // Either side commits and maps the whole segment at once while this process's committed
  // segments stay within `commit_max` bytes (PODNET_SHM_COMMIT); beyond, pages fault in.
  static Result<std::shared_ptr<Channel>> connect(const std::string& socket_name, size_t ring_bytes, size_t bulk_bytes,
                                                  uint64_t my_id, int my_rank, int my_doorbell, size_t commit_max);
  static bool valid_sizes(size_t ring, size_t bulk);
  static constexpr size_t kMinRing = 64 << 10, kMaxRing = size_t{1} << 30, kMinBulk = 256 << 10;
  // Acceptor: maps the segment from a received hello (fds are owned by the channel).
  static Result<std::shared_ptr<Channel>> accept(int sock, int memfd, int peer_doorbell, pid_t peer_pid,
                                                 size_t commit_max);
  // Segment bytes this process committed at channel opening and still maps (tests).
  static size_t committed_bytes() noexcept;

  Role role() const noexcept { return role_; }
  int sock() const noexcept { return sock_; }
  pid_t peer_pid() const noexcept { return peer_pid_; }
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  // The peer is this process (a rank's endpoint to itself, or two contexts in one process);
  // known once ready() (false before).
  bool same_process() const noexcept { return same_process_.load(std::memory_order_relaxed); }
  // Records published so far on channels whose peer is this process: only this process
  // moves it, so a poller that saw no change has nothing to find on those channels.
  static uint64_t local_publishes() noexcept;
  // The acceptor can read and write the connector's memory (process_vm_readv/writev).
  bool cma() const noexcept { return cma_.load(std::memory_order_acquire); }
  // Connector: it can also write the acceptor's memory (the split rendezvous pushes).
  bool cma_push() const noexcept { return cma_push_.load(std::memory_order_acquire); }
  // A record's payload at most: a sixteenth of the ring and at most 64 KiB, so that a large
  // message through the ring (no cross-memory attach) keeps many fragments in flight and the
  // two sides copy at once. A quarter left room for three: the receiver copied them out while
  // the sender waited for space, and then the other way round (docs/performance.md, "The ring
  // without cross-memory attach"); two threads copying through a ring moved the most with
  // 32-64 KiB pieces.
  size_t ring_bytes() const noexcept { return tx_.capacity(); }
  size_t max_fragment() const noexcept {
    return std::min(tx_.capacity() / kFragmentsPerRing, kFragmentMax) - sizeof(RecHdr);
  }
  static constexpr size_t kFragmentsPerRing = 16;
  static constexpr size_t kFragmentMax = 64 << 10;
  // Without cross-memory attach, sends up to this size (and a quarter of the ring) stay eager.
  size_t ring_eager_max() const noexcept { return std::min(tx_.capacity() / 4, kRingEagerMax); }
  static constexpr size_t kRingEagerMax = 256 << 10;

  // Connector: the acceptor's reply arrived.
  void set_ready(pid_t peer_pid, bool cma, bool cma_push, int peer_doorbell);
  // Acceptor: tell the connector our pid, whether we can reach its memory, our doorbell.
  Status send_reply(bool cma, int my_doorbell);
  void set_cma(bool cma) { cma_.store(cma, std::memory_order_release); }

  // Producer: queues `op` (emits it at once when nothing is queued and there is room).
  // kEmitted: in the ring now; its on_emitted request is appended to `done`, or, when `req`
  // is given, left for the caller to complete (no pointer copy, no completion list on the
  // fast path). kQueuedFirst: this call started a queue (someone must drain it); kQueued:
  // behind others; either way `req` was copied into the queued op's on_emitted. kRefused:
  // after close_queue(), nothing is taken and `op` is left as it was.
  enum class Posted { kEmitted, kQueuedFirst, kQueued, kRefused };
  Posted post(OutOp& op, Completions& done, const std::shared_ptr<detail::RequestState>* req = nullptr);
  // The fast path of a message that fits one record: emits `hdr` (plen set here) with `len`
  // payload bytes at once, or returns false, having changed nothing, when post() is needed
  // (closed, not ready, operations queued, or no room).
  bool try_emit_record(RecHdr hdr, const void* payload, size_t len);
  // Emits queued operations while there is room. Returns operations fully emitted.
  int drain(Completions& done);
  bool has_queued();
  // The endpoint failed: refuses later posts and drops queued operations, returning the
  // requests they would complete.
  std::vector<std::shared_ptr<detail::RequestState>> close_queue();

  // Consumer: calls fn(const RecHdr&) for up to `max` records. fn must not block.
  template <typename F>
  int consume(int max, F&& fn) {
    if (!rx_.maybe_nonempty()) return 0;
    std::unique_lock lk(rx_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return 0;
    Consuming mark(this);
    const int n = consume_locked(max, fn);
    if (rx_.release()) ring_peer();
    return n;
  }

  // The peer is gone: calls fn for every record it left, waiting for the consumer's lock
  // (consume() gives up when another thread holds it, and takes at most `max`).
  template <typename F>
  int consume_all(F&& fn) {
    std::lock_guard lk(rx_mu_);
    Consuming mark(this);
    const int n = consume_locked(INT_MAX, fn);
    rx_.release();  // nobody to wake
    return n;
  }

  // Waits until no thread is in the middle of a record (its fn may be copying into or out
  // of a buffer the record named), then runs fn() with the consumer's lock held: what the
  // consumer keeps between records is fn's to change. Called by a thread that consumes this
  // channel further up its stack (from inside a record's fn), runs fn at once. A thread that
  // consumes another channel gives up, without running fn, when the lock stays taken for
  // kConsumerWaitNs: the consumer may be waiting for it (two record callbacks that fail each
  // other's endpoints); others wait as long as the record takes. Returns whether fn ran.
  static constexpr int64_t kConsumerWaitNs = 100'000'000;
  template <typename F>
  bool with_consumer_lock(F&& fn) {
    for (const Consuming* c = t_consuming; c != nullptr; c = c->prev) {
      if (c->channel == this) {
        fn();
        return true;
      }
    }
    const int64_t until = t_consuming != nullptr ? now_ns() + kConsumerWaitNs : INT64_MAX;
    while (!rx_mu_.try_lock()) {
      if (now_ns() > until) return false;
      std::this_thread::yield();
    }
    fn();
    rx_mu_.unlock();
    return true;
  }

  bool arm();      // before blocking: false when there is work
  void disarm();

  void beat() noexcept;        // our heartbeat
  uint64_t peer_heartbeat() const noexcept;
  void say_bye();              // graceful close: the peer will not treat our absence as failure
  void hang_up();              // the peer sees its socket close (the descriptor stays valid)

 private:
  // Marks this thread as the channel's consumer while it holds rx_mu_: a chain, since a
  // record's callback may poll and consume another channel.
  struct Consuming {
    explicit Consuming(const Channel* c) : channel(c), prev(t_consuming) { t_consuming = this; }
    ~Consuming() { t_consuming = prev; }
    Consuming(const Consuming&) = delete;
    Consuming& operator=(const Consuming&) = delete;
    const Channel* channel;
    const Consuming* prev;
  };
  static thread_local const Consuming* t_consuming;

  template <typename F>
  int consume_locked(int max, F& fn) {  // rx_mu_ held
    int n = 0;
    for (; n < max; ++n) {
      const RecHdr* h = rx_.peek();
      if (h == nullptr) break;
      fn(*h);
      rx_.consume(h);
    }
    return n;
  }
  Channel() = default;
  // init: the connector's new segment of rings `ring` and bulk areas `bulk`; else the sizes
  // are read from the segment and checked.
  Status map(int memfd, size_t bytes, bool init, size_t ring, size_t bulk, size_t commit_max);
  bool emit(OutOp& op);  // true when fully emitted
  void ring_peer();
  void publish_tx();  // tx_.publish(), the peer's doorbell if asked, the local count

  Role role_ = Role::kConnector;
  int sock_ = -1;
  int memfd_ = -1;
  std::atomic<int> peer_doorbell_{-1};
  pid_t peer_pid_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> same_process_{false};  // set before ready_; polls read it any time
  std::atomic<bool> cma_{false};
  std::atomic<bool> cma_push_{false};
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool committed_ = false;  // counted in committed_bytes()
  SegmentHeader* seg_ = nullptr;

  SpinLock tx_mu_;  // the producer side: a record or a queue operation at a time
  RingWriter tx_;
  std::deque<OutOp> queued_;
  bool closed_ = false;
  std::atomic<bool> has_queued_{false};
  SpinLock rx_mu_;  // the consumer side: only ever try_lock()ed
  RingReader rx_;
};

}  // namespace podnet::shm
