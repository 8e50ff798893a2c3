// A single-producer/single-consumer byte ring in shared memory, and the records it carries.
//
// Records are 64-byte aligned (a 56-byte header and the payload, padded) and never wrap (a
// pad record fills the end of the buffer when the next record does not fit). A record is
// published by one release store of its header's first 8 bytes (type, flags, code, plen:
// never all zero), written after everything else; the consumer polls that word at its own
// position, so a small message costs it one cache-line transfer (the record), not two (a
// shared head index, then the record). For that to work the word at the consumer's next
// position must read zero until a record is published there: before publishing a record,
// the producer zeroes the first word of the line right after it (so the ring keeps one line
// free: a record never takes the last line before the consumer's released tail). The fast
// path is plain loads and stores: no system call, no lock shared between the processes.
//
// The bulk area (optional, beside each ring): a record whose payload is at least kBulkMin
// bytes keeps only its header line in the ring (flag kBulk) and its payload in a second,
// larger byte ring, allocated first-in first-out in the same order as the records (a payload
// that does not fit before the area's end starts over at 0). Small records then keep cycling
// through a ring small enough to stay in the cores' caches and TLBs, while large payloads
// stream through an area larger than a core's L2 cache, whose lines have left the
// receiver's cache by the time the sender writes them again (docs/shm.md, docs/performance.md
// "Rings larger than the L2 cache"). Both sides compute each payload's place from the sizes
// alone; the consumer writes it into the record's spare last 8 bytes, where payload() finds it.
//
// Sleep/wake-up (Dekker style, a full fence on both sides): a consumer about to block sets
// `consumer_sleeping`, fences, and re-checks its next record; a producer publishes, fences,
// and if the flag is set, clears it and rings the consumer's doorbell (an eventfd). The same
// pair of steps runs the other way for a producer waiting for space (`producer_waiting`).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/tsan.h"

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
  kMapReq,    // request: may the initiator map the region of `key`? (allocated memory only)
  kMapResp,   // reply to kMapReq: key; aux = the owner's memfd descriptor, or code and error text
  kRdvData,   // payload fragment of a ring rendezvous (after a kRing kCts): seq = the send's, aux = offset
};

// kSplit (on kRts): both sides copy half of a large message at once (two cores, one copy each).
// kRing (on kRts and its kCts): no cross-memory attach; once the receive is posted the payload
// follows through the ring (kRdvData), straight into it.
// kBulk: the payload is in the bulk area (see above).
// kOwnKey (on kWriteCma and kRead): an 8-byte payload, the key of the initiator's own region
// (the write's source, the read's destination), which podnet allocated: the target may copy
// its part through a mapping of it (memcpy) instead of with cross-memory attach.
enum RecFlags : uint8_t { kFirst = 1, kLast = 2, kNotify = 4, kSplit = 8, kRing = 16, kBulk = 32, kOwnKey = 64 };

// Payloads at least this large go to the bulk area when the channel has one.
inline constexpr size_t kBulkMin = 4096;

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
inline constexpr size_t bulk_bytes(size_t plen) { return (plen + kCacheLine - 1) & ~(kCacheLine - 1); }
// Where a payload of `need` bytes (a multiple of 64) starts in a bulk area of `cap` bytes
// whose allocation has reached `at` (first in, first out; no payload wraps).
inline constexpr uint64_t bulk_start(uint64_t at, size_t need, size_t cap) {
  const size_t pos = at & (cap - 1);
  return need <= cap - pos ? at : at + (cap - pos);
}

// The producer's place for a record's inline payload (after reserve()).
inline std::byte* inline_payload(RecHdr* h) { return reinterpret_cast<std::byte*>(h) + sizeof(RecHdr); }

// The first 8 bytes of a record header, as the publishing word.
inline std::atomic<uint64_t>& first_word(RecHdr* h) { return *reinterpret_cast<std::atomic<uint64_t>*>(h); }
inline const std::atomic<uint64_t>& first_word(const RecHdr* h) {
  return *reinterpret_cast<const std::atomic<uint64_t>*>(h);
}
static_assert(offsetof(RecHdr, seq) == sizeof(uint64_t), "type, flags, code and plen form the first word");

// The shared part of one ring; the data area follows it in the segment.
struct RingCtl {
  alignas(2 * kCacheLine) std::atomic<uint64_t> tail{0};  // bytes released (consumer)
  alignas(2 * kCacheLine) std::atomic<uint32_t> consumer_sleeping{0};
  alignas(2 * kCacheLine) std::atomic<uint32_t> producer_waiting{0};
  alignas(2 * kCacheLine) std::atomic<uint64_t> bulk_tail{0};  // bulk bytes released (consumer)
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need lock-free atomics");

class RingWriter {
 public:
  void init(RingCtl* ctl, std::byte* data, size_t capacity) {
    ctl_ = ctl;
    data_ = data;
    cap_ = capacity;
    tail_cache_ = ctl->tail.load(std::memory_order_acquire);
    head_ = published_ = tail_cache_;  // a new ring: both 0
  }
  // The bulk area of `capacity` bytes (a power of two, at least twice the largest payload).
  void init_bulk(std::byte* data, size_t capacity) {
    bulk_ = data;
    bulk_cap_ = capacity;
    bulk_tail_cache_ = ctl_->bulk_tail.load(std::memory_order_acquire);
    bulk_head_ = bulk_tail_cache_;
  }
  size_t capacity() const noexcept { return cap_; }
  // Space for a record with a payload of `plen` bytes: in the bulk area from kBulkMin when
  // there is one (commit() then marks the header kBulk), else inline after the header. *data
  // is the payload's place; nullptr when there is no room yet.
  RecHdr* reserve_payload(size_t plen, std::byte** data) {
    if (goes_to_bulk(plen)) return reserve_bulk(plen, data);
    RecHdr* h = reserve(record_bytes(plen));
    if (h != nullptr) *data = inline_payload(h);
    return h;
  }
  bool goes_to_bulk(size_t plen) const noexcept { return plen >= kBulkMin && bulk_cap_ != 0; }
  // Space for a record whose payload of `plen` bytes goes to the bulk area: its header line in
  // the ring, *data its payload's place; nullptr when either has no room yet. Fill the
  // payload, then commit() the header (marked kBulk there).
  RecHdr* reserve_bulk(size_t plen, std::byte** data) {
    const size_t need = bulk_bytes(plen);
    const uint64_t start = bulk_start(bulk_head_, need, bulk_cap_);
    if (!bulk_room(start + need - bulk_head_)) return nullptr;
    RecHdr* h = reserve(kCacheLine);
    if (h == nullptr) return nullptr;
    pending_bulk_ = start + need - bulk_head_;
    *data = bulk_ + (start & (bulk_cap_ - 1));
    return h;
  }
  // Space for one record of `bytes` (a multiple of 64, at most capacity/2), or nullptr when
  // the consumer has not released enough yet. Fill the payload (after the header), then
  // commit() the header.
  RecHdr* reserve(size_t bytes) {
    size_t pos = head_ & (cap_ - 1);
    size_t contig = cap_ - pos;
    size_t need = bytes <= contig ? bytes : contig + bytes;
    if (!room(need + kCacheLine)) return nullptr;  // and the line after it, zeroed below
    if (bytes > contig) {  // pad to the end, start over at 0
      RecHdr pad{};
      pad.type = Rec::kPad;
      pad.plen = static_cast<uint32_t>(contig - sizeof(RecHdr));
      publish_at(pos, pad, contig);
      head_ += contig;
      pos = 0;
    }
    pending_ = bytes;
    return reinterpret_cast<RecHdr*>(data_ + pos);
  }
  // Publishes the record reserve() returned, with header `h` (its payload is in place).
  void commit(const RecHdr& h) {
    if (pending_bulk_ != 0) {
      RecHdr bulk = h;
      bulk.flags |= kBulk;
      publish_at(head_ & (cap_ - 1), bulk, pending_);
    } else {
      publish_at(head_ & (cap_ - 1), h, pending_);
    }
    head_ += pending_;
    bulk_head_ += pending_bulk_;
    pending_bulk_ = 0;
  }
  // After one or more commits: true when the consumer asked for a wake-up.
  bool publish() {
    if (head_ == published_) return false;
    published_ = head_;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->consumer_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before the producer's engine blocks with records waiting for space: asks the consumer
  // for a wake-up; false when space freed up meanwhile (do not block).
  // The same for a record with a payload of `plen` bytes (reserve_payload()'s choice).
  bool arm_for_payload(size_t plen) {
    return goes_to_bulk(plen) ? arm_for_space(kCacheLine, bulk_bytes(plen)) : arm_for_space(record_bytes(plen), 0);
  }
  // `bulk`: the bulk bytes the next record needs (0: none).
  bool arm_for_space(size_t bytes, size_t bulk) {
    ctl_->producer_waiting.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return !(room(bytes + cap_ / 4) && (bulk == 0 || bulk_room(2 * bulk + bulk_cap_ / 4)));
  }
  void disarm() { ctl_->producer_waiting.store(0, std::memory_order_relaxed); }

 private:
  bool room(size_t need) {
    if (head_ + need - tail_cache_ <= cap_) return true;
    tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
    handover_acquire();  // the consumer is done with the space it released
    return head_ + need - tail_cache_ <= cap_;
  }
  bool bulk_room(size_t need) {
    if (bulk_head_ + need - bulk_tail_cache_ <= bulk_cap_) return true;
    bulk_tail_cache_ = ctl_->bulk_tail.load(std::memory_order_acquire);
    handover_acquire();
    return bulk_head_ + need - bulk_tail_cache_ <= bulk_cap_;
  }
  // The record of `bytes` at `pos`: the line after it reads empty first, then the header's
  // tail, then its first word (release), which makes it visible.
  void publish_at(size_t pos, const RecHdr& h, size_t bytes) {
    auto* next = reinterpret_cast<RecHdr*>(data_ + ((pos + bytes) & (cap_ - 1)));
    first_word(next).store(0, std::memory_order_relaxed);
    auto* dst = reinterpret_cast<RecHdr*>(data_ + pos);
    std::memcpy(reinterpret_cast<std::byte*>(dst) + sizeof(uint64_t), reinterpret_cast<const std::byte*>(&h) + sizeof(uint64_t),
                sizeof(RecHdr) - sizeof(uint64_t));
    uint64_t w;
    std::memcpy(&w, &h, sizeof w);
    handover_release();
    first_word(dst).store(w, std::memory_order_release);
  }

  RingCtl* ctl_ = nullptr;
  std::byte* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t head_ = 0, published_ = 0, tail_cache_ = 0;
  size_t pending_ = 0;
  std::byte* bulk_ = nullptr;
  size_t bulk_cap_ = 0;
  uint64_t bulk_head_ = 0, bulk_tail_cache_ = 0;
  size_t pending_bulk_ = 0;
};

class RingReader {
 public:
  void init(RingCtl* ctl, std::byte* data, size_t capacity) {
    ctl_ = ctl;
    data_ = data;
    cap_ = capacity;
    tail_ = ctl->tail.load(std::memory_order_relaxed);
  }
  void init_bulk(std::byte* data, size_t capacity) {
    bulk_ = data;
    bulk_cap_ = capacity;
    bulk_tail_ = ctl_->bulk_tail.load(std::memory_order_relaxed);
  }
  // The next record, or nullptr when the ring is empty. Skips pads. A bulk record gets its
  // payload's place written into its spare bytes (computed here, never taken from the peer;
  // a bulk record on a channel without a bulk area, which no podnet peer sends, reads as
  // having its payload inline).
  const RecHdr* peek() {
    for (;;) {
      auto* h = reinterpret_cast<RecHdr*>(data_ + (tail_ & (cap_ - 1)));
      if (first_word(h).load(std::memory_order_acquire) == 0) return nullptr;
      handover_acquire();
      if (h->type == Rec::kPad) {
        tail_ += record_bytes(h->plen);
        continue;
      }
      if (h->flags & kBulk) {
        int64_t at = static_cast<int64_t>(sizeof(RecHdr));
        if (const size_t need = area_bytes(h); need != 0)
          at = bulk_ + (bulk_start(bulk_tail_, need, bulk_cap_) & (bulk_cap_ - 1)) - reinterpret_cast<std::byte*>(h);
        std::memcpy(reinterpret_cast<std::byte*>(h) + sizeof(RecHdr), &at, sizeof at);
      }
      return h;
    }
  }
  // Without the consumer's lock: false only when the ring is certainly empty (nothing is
  // published at the released tail, and so nothing at the consumer's position either).
  bool maybe_nonempty() const {
    uint64_t t = ctl_->tail.load(std::memory_order_acquire);
    return first_word(reinterpret_cast<const RecHdr*>(data_ + (t & (cap_ - 1)))).load(std::memory_order_acquire) != 0;
  }
  // Releases the record peek() returned (its memory may be overwritten from now on).
  void consume(const RecHdr* h) {
    if (!(h->flags & kBulk)) {
      tail_ += record_bytes(h->plen);
      return;
    }
    tail_ += kCacheLine;
    if (const size_t need = area_bytes(h); need != 0) bulk_tail_ = bulk_start(bulk_tail_, need, bulk_cap_) + need;
  }
  // Makes released space visible; true when the producer asked for a wake-up.
  bool release() {
    const bool bulk_moved = bulk_cap_ != 0 && ctl_->bulk_tail.load(std::memory_order_relaxed) != bulk_tail_;
    if (ctl_->tail.load(std::memory_order_relaxed) == tail_ && !bulk_moved) return false;
    handover_release();
    if (bulk_moved) ctl_->bulk_tail.store(bulk_tail_, std::memory_order_release);
    ctl_->tail.store(tail_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->producer_waiting.load(std::memory_order_relaxed) != 0 &&
           ctl_->producer_waiting.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before the consumer's engine blocks: asks for a wake-up; false when a record arrived.
  bool arm() {
    ctl_->consumer_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto* h = reinterpret_cast<const RecHdr*>(data_ + (tail_ & (cap_ - 1)));
    return first_word(h).load(std::memory_order_acquire) == 0;
  }
  void disarm() { ctl_->consumer_sleeping.store(0, std::memory_order_relaxed); }

 private:
  // The bulk bytes a kBulk record's payload takes in the area; 0 when it has none there (no
  // area, or a size no podnet peer sends: the payload then reads as inline).
  size_t area_bytes(const RecHdr* h) const noexcept {
    const size_t need = bulk_bytes(h->plen);
    return bulk_cap_ != 0 && need <= bulk_cap_ ? need : 0;
  }

  RingCtl* ctl_ = nullptr;
  std::byte* data_ = nullptr;  // the consumer writes a bulk record's payload place (peek)
  size_t cap_ = 0;
  uint64_t tail_ = 0;
  std::byte* bulk_ = nullptr;
  size_t bulk_cap_ = 0;
  uint64_t bulk_tail_ = 0;
};

// A record's payload, for the consumer (after peek()): inline, or in the bulk area.
inline const std::byte* payload(const RecHdr* h) {
  const auto* b = reinterpret_cast<const std::byte*>(h);
  if (!(h->flags & kBulk)) return b + sizeof(RecHdr);
  int64_t at;
  std::memcpy(&at, b + sizeof(RecHdr), sizeof at);
  return b + at;
}

}  // namespace podnet::shm
