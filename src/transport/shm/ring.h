// A single-producer/single-consumer byte ring in shared memory, and the records it carries.
//
// Records are 64-byte aligned (a 56-byte header and the payload, padded), never wrap (a pad
// record fills the end of the buffer when the next record does not fit), and are published
// with one release store of `head`. The fast path is plain loads and stores: no system call,
// no lock shared between the processes.
//
// Sleep/wake-up (Dekker style, a full fence on both sides): a consumer about to block sets
// `consumer_sleeping`, fences, and re-checks the ring; a producer publishes, fences, and if
// the flag is set, clears it and rings the consumer's doorbell (an eventfd). The same pair of
// steps runs the other way for a producer waiting for space (`producer_waiting`).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace podnet::shm {

inline constexpr size_t kCacheLine = 64;

enum class Rec : uint8_t {
  kPad = 0,
  kSend,      // eager message (fragments: kFirst on the first, kLast on the last); key = tag
  kRts,       // rendezvous: the receiver pulls `len` bytes from the sender's `aux` address
  kWrite,     // inline write fragment: region key, op addr/len, aux = offset of this fragment
  kWriteCma,  // single-copy write: the target pulls `len` bytes from the initiator's `aux`
  kRead,      // read request: aux = the initiator's destination address
  kAck,       // reply to kWrite/kWriteCma/kRead(Cma): code, error text as payload
  kReadData,  // reply to kRead: fragment at offset aux
  kFin,       // reply to kRts: the receiver pulled the data (or failed: code)
  kCts,       // reply to a kSplit kRts: the receiver's buffer (addr); the sender pushes [aux, len)
  kPushDone,  // request: the sender pushed its part of a split rendezvous (code)
};

// kSplit (on kRts): both sides copy half of a large message at once (two cores, one copy each).
enum RecFlags : uint8_t { kFirst = 1, kLast = 2, kNotify = 4, kSplit = 8 };

struct RecHdr {
  Rec type;
  uint8_t flags;
  uint16_t code;   // Status code of a reply (0: ok)
  uint32_t plen;   // payload bytes after the header
  uint64_t seq;    // the initiator's operation sequence number
  uint64_t key;    // region key (one-sided) or tag (messages)
  uint64_t addr;   // target address of the operation
  uint64_t len;    // total length of the operation
  uint64_t aux;    // fragment offset or the initiator's buffer address (single-copy)
  uint64_t imm;    // write_notify immediate
};
static_assert(sizeof(RecHdr) == 56);

inline constexpr size_t record_bytes(size_t plen) { return (sizeof(RecHdr) + plen + kCacheLine - 1) & ~(kCacheLine - 1); }

// The shared part of one ring; the data area follows it in the segment.
struct RingCtl {
  alignas(2 * kCacheLine) std::atomic<uint64_t> head{0};  // bytes published (producer)
  alignas(2 * kCacheLine) std::atomic<uint64_t> tail{0};  // bytes released (consumer)
  alignas(2 * kCacheLine) std::atomic<uint32_t> consumer_sleeping{0};
  alignas(2 * kCacheLine) std::atomic<uint32_t> producer_waiting{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need lock-free atomics");

class RingWriter {
 public:
  void init(RingCtl* ctl, std::byte* data, size_t capacity) {
    ctl_ = ctl;
    data_ = data;
    cap_ = capacity;
    head_ = published_ = ctl->head.load(std::memory_order_relaxed);
    tail_cache_ = ctl->tail.load(std::memory_order_acquire);
  }
  size_t capacity() const noexcept { return cap_; }
  // Space for one record of `bytes` (a multiple of 64, at most capacity/2), or nullptr when
  // the consumer has not released enough yet. Call commit() after filling it.
  RecHdr* reserve(size_t bytes) {
    size_t pos = head_ & (cap_ - 1);
    size_t contig = cap_ - pos;
    size_t need = bytes <= contig ? bytes : contig + bytes;
    if (!room(need)) return nullptr;
    if (bytes > contig) {  // pad to the end, start over at 0
      auto* pad = reinterpret_cast<RecHdr*>(data_ + pos);
      pad->type = Rec::kPad;
      pad->plen = static_cast<uint32_t>(contig - sizeof(RecHdr));
      head_ += contig;
      pos = 0;
    }
    pending_ = bytes;
    return reinterpret_cast<RecHdr*>(data_ + pos);
  }
  void commit() { head_ += pending_; }
  // Makes committed records visible; true when the consumer asked for a wake-up.
  bool publish() {
    if (head_ == published_) return false;
    published_ = head_;
    ctl_->head.store(head_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->consumer_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before the producer's engine blocks with records waiting for space: asks the consumer
  // for a wake-up; false when space freed up meanwhile (do not block).
  bool arm_for_space(size_t bytes) {
    ctl_->producer_waiting.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return !room(bytes + cap_ / 4);
  }
  void disarm() { ctl_->producer_waiting.store(0, std::memory_order_relaxed); }

 private:
  bool room(size_t need) {
    if (head_ + need - tail_cache_ <= cap_) return true;
    tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
    return head_ + need - tail_cache_ <= cap_;
  }

  RingCtl* ctl_ = nullptr;
  std::byte* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t head_ = 0, published_ = 0, tail_cache_ = 0;
  size_t pending_ = 0;
};

class RingReader {
 public:
  void init(RingCtl* ctl, std::byte* data, size_t capacity) {
    ctl_ = ctl;
    data_ = data;
    cap_ = capacity;
    tail_ = ctl->tail.load(std::memory_order_relaxed);
    head_cache_ = ctl->head.load(std::memory_order_acquire);
  }
  // The next record, or nullptr when the ring is empty. Skips pads.
  const RecHdr* peek() {
    for (;;) {
      if (tail_ == head_cache_) {
        head_cache_ = ctl_->head.load(std::memory_order_acquire);
        if (tail_ == head_cache_) return nullptr;
      }
      auto* h = reinterpret_cast<const RecHdr*>(data_ + (tail_ & (cap_ - 1)));
      if (h->type != Rec::kPad) return h;
      tail_ += record_bytes(h->plen);
    }
  }
  // Without the consumer's lock: false only when the ring is certainly empty (the released
  // tail caught up with the published head).
  bool maybe_nonempty() const {
    return ctl_->head.load(std::memory_order_acquire) != ctl_->tail.load(std::memory_order_relaxed);
  }
  // Releases the record peek() returned (its memory may be overwritten from now on).
  void consume(const RecHdr* h) { tail_ += record_bytes(h->plen); }
  // Makes released space visible; true when the producer asked for a wake-up.
  bool release() {
    if (ctl_->tail.load(std::memory_order_relaxed) == tail_) return false;
    ctl_->tail.store(tail_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->producer_waiting.load(std::memory_order_relaxed) != 0 &&
           ctl_->producer_waiting.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before the consumer's engine blocks: asks for a wake-up; false when a record arrived.
  bool arm() {
    ctl_->consumer_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->head.load(std::memory_order_acquire) == tail_;
  }
  void disarm() { ctl_->consumer_sleeping.store(0, std::memory_order_relaxed); }

 private:
  RingCtl* ctl_ = nullptr;
  const std::byte* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t tail_ = 0, head_cache_ = 0;
};

inline std::byte* payload(RecHdr* h) { return reinterpret_cast<std::byte*>(h) + sizeof(RecHdr); }
inline const std::byte* payload(const RecHdr* h) { return reinterpret_cast<const std::byte*>(h) + sizeof(RecHdr); }

}  // namespace podnet::shm
