// The shared collective arena: one memfd segment mapped by every rank of a communicator
// whose ranks are all on one host. Small collectives run through it without the transfer
// engine: each rank copies its input into its own slot and publishes it with one release
// store; the others read the slots directly. No request objects, no tag matching, no
// system call on the fast path.
//
// Layout: a header page; per rank a control line (written by its owner: the last call it
// finished reading, and the call it is in now) and a wake line (written by the ranks that
// sleep on it); per rank kBuffers buffers, used round robin by arena call number: every
// kLargeEvery-th one (index 0, 4, 8, ...) a slot (the slot bytes), the others small (one
// page, kSmallBuffer). A call whose payload does not fit a small buffer takes the next
// call number that is a multiple of kLargeEvery, so its data always lands in a slot: 16
// slots' worth of memory per rank, as many calls of slack as there are buffers. A buffer
// starts with a 32-byte header (call number, then the call's signature) and its data
// follows at +64. Payloads up to 32 bytes do not use the buffers but a rank's two line
// pages, where entry (s mod kBuffers) holds call s's header and data, one entry after the
// other: payloads up to 8 bytes in 32-byte entries (a 24-byte header, two calls per cache
// line), up to 32 bytes in 64-byte ones. A rank that runs ahead (a broadcast's root) then
// fills a line for several calls with one cache-line transfer, and the reader finds them
// in order (2 ranks, 8-byte broadcast: 100-114 -> 69-71 ns per call; docs/collectives.md).
//
// Reuse: a rank writes buffer (s mod kBuffers) only after every rank has finished call
// s - kBuffers (the buffer's previous call is at most that, skipped numbers included). Calls
// in which a rank sees every other rank's post prove that without reading anything (they
// posted s only after finishing every call before it).
//
// Slack: a rank that does not wait for the others in a call (a broadcast's root, a
// reduce's non-roots) runs up to kBuffers calls ahead of the slowest. On a host with more
// ranks than CPUs that is what keeps them from switching on every call: 4 ranks on 2 CPUs,
// 32-byte broadcast, 0.67-0.68 us per call with 64 buffers against 1.14-2.04 with 16
// (docs/collectives.md).
//
// Waiting: spin, then yield (at once when the ranks outnumber the CPUs), then sleep on a shared futex (the poster wakes only when its
// wake line counts sleepers; with membarrier the poster needs no fence, see wake_sleepers).
// While waiting, the arena checks for an abort, the peer's
// endpoint health, a peer that is in another call (a clear mismatch error) and the
// communicator's timeout.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coll/call.h"

namespace podnet::detail {

class Arena {
 public:
  static constexpr int kBuffers = 64;
  static constexpr int kLargeEvery = 4;
  static constexpr int kSlots = kBuffers / kLargeEvery;  // buffers that hold a slot
  static constexpr size_t kSmallBuffer = 4096;
  // Small buffers lie kSmallStride apart: two lines more than a page, so that their headers
  // do not all fall into one set of the L1 cache (the default slots, 512 KiB + 128 bytes
  // apart, do not either).
  static constexpr size_t kSmallStride = kSmallBuffer + 128;

  // Collective over the ranks of `c` (they all call it at the same point of their call
  // sequence): rank 0 makes the segment, the others map it through /proc/<pid>/fd, and all
  // agree. Returns nullptr when any rank cannot take part (`local_ok` false, or the
  // segment could not be made or mapped); `why` says why on this rank.
  static Result<std::unique_ptr<Arena>> establish(Call& c, size_t slot_bytes, bool local_ok, std::string* why);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  size_t slot_bytes() const noexcept { return slot_bytes_; }
  // Publishes the call this rank is in (every collective, arena or not), so that a rank
  // waiting in the arena can name a peer that called something else.
  void publish(const CallInfo& ci);

  // One arena call: begin() numbers it; writers wait_writable(), fill slot(), post();
  // readers wait_posted(); everyone finish()es. `bytes` is this call's payload per slot.
  // `bytes`: the largest payload a slot of this call holds (pages are mapped ahead for it).
  // All ranks must pass the same `bytes` (it decides the call number).
  uint32_t begin(size_t bytes) {
    if (bytes > mapped_) map_ahead(bytes);
    ++seq_;
    if (!fits_small(bytes)) seq_ += (kLargeEvery - seq_ % kLargeEvery) % kLargeEvery;
    return static_cast<uint32_t>(seq_);
  }
  Status wait_writable(Call& c, uint32_t s);  // s: the call begun last
  std::byte* slot(int rank, uint32_t s, size_t bytes);
  void post(Call& c, uint32_t s, size_t bytes);
  // The data rank `r` posted for call `s`, after checking that it is the same call.
  Result<const std::byte*> wait_posted(Call& c, int r, uint32_t s, size_t bytes);
  // This rank has seen every other rank's post of call `s`.
  void saw_all(uint32_t s) {
    known_done_ = s - 1;
    if (touch_want_ > touched_) touch_peers();
  }
  void finish(uint32_t s);

  // Cross-memory attach between every pair of ranks (agreed at set-up): a call may post an
  // address of its own memory and the others read from it or write into it directly (one
  // copy, no slot).
  bool cma() const noexcept { return cma_; }
  // Copies `bytes` at address `from` of rank r into `to`, or from `from` to address `to`
  // of rank r; an error names the rank.
  Status read_peer(Call& c, int r, void* to, uint64_t from, size_t bytes) {
    return cross(c, r, false, static_cast<std::byte*>(to), from, bytes);
  }
  Status write_peer(Call& c, int r, uint64_t to, const void* from, size_t bytes) {
    // process_vm_writev only reads the local side (its iovec type is not const).
    return cross(c, r, true, const_cast<std::byte*>(static_cast<const std::byte*>(from)), to, bytes);
  }
  // Waits until every other rank has finished call `s` (done reading what this rank posted).
  Status wait_finished(Call& c, uint32_t s);

  // Whether, on this host, one cross-memory copy costs less than handing a block over
  // through the segment (the owner's copy in and a peer's copy out, each moving cache lines
  // between cores). The tuner's crossovers between the arena and "cma" depend on it
  // (arena_crossover). Decided by rank 0, the same on every rank: PODNET_SHM_PREFER, or with
  // "probe" (the default) measured at set-up by ranks 0 and 1 (arena_probe.cc). False
  // without cross-memory attach.
  bool cma_cheap() const noexcept { return cma_cheap_; }

 private:
  struct Header;
  struct Ctl;
  struct Wake;
  // What the set-up probe measured (the best of its rounds; zeros where it did not finish):
  // rank 1 writing `bytes` into its buffer, rank 0 copying them out, and rank 0 reading as
  // many with one process_vm_readv from rank 1. Logged at info by rank 0.
  struct CopyCosts {
    size_t bytes = 0;
    int64_t write_ns = 0, read_ns = 0, cma_ns = 0;
  };
  Arena() = default;
  Header* header(int r, uint32_t s, size_t bytes);  // where rank r's post of call s with `bytes` goes
  Header* buffer(int r, uint32_t b);                 // rank r's buffer b
  std::byte* lines(int r);                           // rank r's line pages
  static constexpr size_t kMiniBytes = 8, kMiniEntry = 32;   // payloads this small: 32-byte entries
  static constexpr size_t kTinyBytes = 32, kTinyEntry = 64;  // up to this: 64-byte entries
  static constexpr size_t kLinePage = 4096;                  // a page of each kind of entry, per rank
  static constexpr size_t kLinePages = 2 * kLinePage;
  static bool large(uint32_t b) { return b % kLargeEvery == 0; }  // buffer index b holds a slot
  // Where the data starts after its header: in the header's line (entries) or at +64 (buffers).
  static size_t data_off(size_t bytes) { return bytes <= kMiniBytes ? 24 : bytes <= kTinyBytes ? 32 : 64; }
  static bool fits_small(size_t bytes) { return data_off(bytes) + bytes <= kSmallBuffer; }
  Ctl* ctl(int r);
  Wake* wake(int r);
  // Waits until `word` (rank r's) satisfies `ready`; what/peer name the wait in errors.
  template <typename Ready>
  Status wait_word(Call& c, int r, std::atomic<uint32_t>* word, Ready ready, const char* what);
  // Abort, peer health, a peer in another call, the timeout; `past` gets the call rank r is
  // in when it is already past this one (wait_word decides whether that is an error).
  Status slow_checks(Call& c, int r, const char* what, int64_t deadline, std::optional<CallInfo>* past);
  void wake_sleepers(Wake* w, std::atomic<uint32_t>* word);
  Status cross(Call& c, int r, bool to_peer, std::byte* mine, uint64_t theirs, size_t bytes);
  void map_ahead(size_t bytes);
  void map_headers();  // readies every slot buffer's first page (set-up)
  void touch_peers();  // reads every peer buffer's pages up to touch_want_ (see map_ahead)
  void introduce();    // writes this rank's pid and mapping address into its control line
  int pid_of(int r);        // what rank r introduced: its pid,
  uint64_t base_of(int r);  // and where it maps the segment
  bool probe_peers();  // whether this rank can read every other rank's memory
  // Set-up, after cma_ is agreed: decides cma_cheap_ on every rank (arena_probe.cc).
  Status choose_copies(Call& c);
  // Every rank's `bits`, ANDed, on every rank (a set-up exchange through rank 0, tags tag
  // and tag + 1).
  static Status agree_bits(Call& c, uint32_t& bits, uint32_t tag);
  CopyCosts probe_reader(int64_t deadline);  // rank 0's side of the probe (write_ns left 0)
  int64_t probe_writer(int64_t deadline);  // rank 1's: returns its best write time, 0 if none

  std::byte* base_ = nullptr;
  size_t map_bytes_ = 0;
  size_t slot_bytes_ = 0;
  size_t stride_ = 0;    // bytes per slot buffer
  size_t per_rank_ = 0;  // bytes of one rank's buffers
  size_t lines_off_ = 0;    // the line pages (kLinePages per rank; page aligned)
  size_t buffers_off_ = 0;  // the buffers (per_rank_ per rank)
  int n_ = 0, me_ = 0;
  bool oversubscribed_ = false;  // more ranks than CPUs this process may run on: yield at once
  bool light_post_ = false;      // every rank registered for membarrier: posters skip the fence
  uint64_t seq_ = 0;         // the last call number begun (64 bits: the first kBuffers calls stay known after a wrap)
  uint32_t known_done_ = 0;  // every rank has finished at least this call
  size_t mapped_ = 0;        // the own slot buffers are written for payloads this large
  size_t touch_want_ = 0;    // bytes of every buffer (header included) the peers have written
  size_t touched_ = 0;       // of which this rank has read every page of theirs
  bool cma_ = false;         // every rank can read every other one's memory
  bool cma_cheap_ = false;   // see cma_cheap()
};

}  // namespace podnet::detail
