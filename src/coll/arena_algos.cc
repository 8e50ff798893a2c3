// Collectives through the shared collective arena (coll/arena.h): every rank copies its
// input into its own slot, posts it, and reads the slots it needs. Because every input is
// copied before any output is written, in-place calls need no special case. Reductions
// combine the slots in rank order, so every rank computes bitwise identical results.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/copy.h"
#include "coll/algorithms.h"
#include "coll/arena.h"
#include "coll/reduce_kernels.h"

namespace podnet::detail::algo {
namespace {

std::byte* B(void* p) { return static_cast<std::byte*>(p); }

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

// Posts `bytes` from `src` (skipped when null) as this rank's data for call s.
Status put(Call& c, Arena& a, uint32_t s, const void* src, size_t bytes) {
  PODNET_RETURN_IF_ERROR(a.wait_writable(c, s));
  if (src != nullptr) copy(a.slot(c.rank(), s, bytes), src, bytes);
  a.post(c, s, bytes);
  return {};
}

// Waits for every rank's post of call s; slots[r] points at rank r's data.
Status get_all(Call& c, Arena& a, uint32_t s, size_t bytes, const std::byte** slots) {
  for (int r = 0; r < c.size(); ++r) {
    if (r == c.rank()) {
      slots[r] = a.slot(r, s, bytes);
      continue;
    }
    PODNET_ASSIGN_OR_RETURN(slots[r], a.wait_posted(c, r, s, bytes));
  }
  a.saw_all(s);
  return {};
}

// out = slot[0] op slot[1] op ... over `count` elements at element offset `off`.
void reduce_slots(Call& c, void* out, const std::byte* const* slots, size_t off, size_t count) {
  const int n = c.size();
  const size_t o = off * c.esize();
  if (n == 1) {
    copy(out, slots[0] + o, count * c.esize());
  } else {
    c.reduce3(out, slots[0] + o, slots[1] + o, count);
    for (int r = 2; r < n; ++r) c.reduce(out, slots[r] + o, count);
  }
  if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), out, count, n);
}

constexpr int kInline = 64;
// allreduce on more than two ranks from this many bytes: each rank reduces its block only.
constexpr size_t kSplitReduceMin = 16 * 1024;

// Slot pointers on the stack for the usual world sizes.
struct Slots {
  explicit Slots(int n) : heap(n > kInline ? n : 0) {}
  const std::byte** get() { return heap.empty() ? inline_ : heap.data(); }
  const std::byte* inline_[kInline];
  std::vector<const std::byte*> heap;
};

}  // namespace

size_t arena_bytes(Collective coll, size_t bytes, int n) {
  switch (coll) {
    case Collective::kAlltoall:
    case Collective::kReduceScatter:
    case Collective::kScatter:
      return bytes * static_cast<size_t>(n);
    case Collective::kBarrier:
      return 0;
    default:
      return bytes;
  }
}

namespace {

// One call in which every rank posts `total` bytes of `send` (nothing when null); the ranks
// that `read` then wait for every slot and `use` them; all finish.
template <typename Use>
Status everyone_posts(Call& c, Arena& a, const void* send, size_t total, bool read, Use&& use) {
  const uint32_t s = a.begin(total);
  PODNET_RETURN_IF_ERROR(put(c, a, s, send, total));
  if (read) {
    Slots sl(c.size());
    PODNET_RETURN_IF_ERROR(get_all(c, a, s, total, sl.get()));
    use(sl.get());
  }
  a.finish(s);
  return {};
}

// One call in which `root` posts `total` bytes of `send`; every rank `use`s the posted copy.
template <typename Use>
Status root_posts(Call& c, Arena& a, const void* send, size_t total, int root, Use&& use) {
  const uint32_t s = a.begin(total);
  if (c.rank() == root) {
    PODNET_RETURN_IF_ERROR(put(c, a, s, send, total));
    use(static_cast<const std::byte*>(a.slot(root, s, total)));
  } else {
    PODNET_ASSIGN_OR_RETURN(const std::byte* src, a.wait_posted(c, root, s, total));
    use(src);
  }
  a.finish(s);
  return {};
}

// allreduce of a vector that fits a slot, a part of one of `total` bytes.
Status shm_allreduce_part(Call& c, Arena& a, const void* send, void* recv, size_t count, size_t total) {
  const int n = c.size(), me = c.rank();
  const size_t es = c.esize();
  if (n <= 2 || count * es < kSplitReduceMin)
    return everyone_posts(c, a, send, count * es, true,
                          [&](const std::byte* const* slots) { reduce_slots(c, recv, slots, 0, count); });
  // Every rank reducing the whole vector reads n vectors: n times the work, which on more
  // ranks than that reads in one go is worth a second post. Rank r reduces block r of
  // every input into its slot of a second call; then every rank copies the n blocks out.
  const uint32_t s1 = a.begin(count * es);
  PODNET_RETURN_IF_ERROR(put(c, a, s1, send, count * es));
  Slots sl(n);
  PODNET_RETURN_IF_ERROR(get_all(c, a, s1, count * es, sl.get()));
  const uint32_t s2 = a.begin(block_cnt(count, n, 0) * es);  // the largest block: s1 mapped that far
  PODNET_RETURN_IF_ERROR(a.wait_writable(c, s2));
  const size_t my_cnt = block_cnt(count, n, me);
  std::byte* part = a.slot(me, s2, my_cnt * es);
  reduce_slots(c, part, sl.get(), block_off(count, n, me), my_cnt);
  a.finish(s1);
  a.post(c, s2, my_cnt * es);
  for (int k = 0; k < n; ++k) {
    const int r = (me + k) % n;  // the own block first: it is ready
    const size_t cnt = block_cnt(count, n, r);
    const std::byte* src = part;
    if (r != me) {
      PODNET_ASSIGN_OR_RETURN(src, a.wait_posted(c, r, s2, cnt * es));
    }
    copy_part_to_output(B(recv) + block_off(count, n, r) * es, src, cnt * es, total);
  }
  a.saw_all(s2);
  a.finish(s2);
  return {};
}

}  // namespace

Status shm_allreduce(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  // Vectors larger than a slot go through in slot-sized parts, one after the other (an
  // empty vector is one call, as every collective is).
  const size_t es = c.esize(), part = std::max<size_t>(1, a.slot_bytes() / es);
  size_t off = 0;
  do {
    const size_t cnt = std::min(part, count - off);
    PODNET_RETURN_IF_ERROR(
        shm_allreduce_part(c, a, static_cast<const std::byte*>(send) + off * es, B(recv) + off * es, cnt, count * es));
    off += cnt;
  } while (off < count);
  return {};
}

Status shm_reduce(Call& c, Arena& a, const void* send, void* recv, size_t count, int root) {
  return everyone_posts(c, a, send, count * c.esize(), c.rank() == root,
                        [&](const std::byte* const* slots) { reduce_slots(c, recv, slots, 0, count); });
}

Status shm_reduce_scatter(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  return everyone_posts(c, a, send, count * c.esize() * c.size(), true, [&](const std::byte* const* slots) {
    reduce_slots(c, recv, slots, count * c.rank(), count);
  });
}

Status shm_allgather(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  const int n = c.size(), me = c.rank();
  const size_t bytes = count * c.esize();
  if (bytes <= a.slot_bytes()) {
    // The own block goes straight from the input (which the post just read into the cache)
    // while the others post; only the peers' blocks come out of their slots.
    const uint32_t s = a.begin(bytes);
    PODNET_RETURN_IF_ERROR(put(c, a, s, send, bytes));
    std::byte* own = B(recv) + me * bytes;
    if (bytes > 0 && send != own) std::memmove(own, send, bytes);  // an input inside the output may overlap
    Slots sl(n);
    PODNET_RETURN_IF_ERROR(get_all(c, a, s, bytes, sl.get()));
    for (int r = 0; r < n; ++r)
      if (r != me) copy(B(recv) + r * bytes, sl.get()[r], bytes);
    a.finish(s);
    return {};
  }
  // Blocks larger than a slot go through in slot-sized parts, each an arena call of its
  // own; a rank runs up to Arena::kSlots parts ahead of the slowest. Every part
  // writes only its own range of each output block, so an input in place (the own block)
  // is read before anything overwrites it; an input anywhere else inside the output is
  // moved to the own block first.
  const auto* in = static_cast<const std::byte*>(send);
  std::byte* own = B(recv) + me * bytes;
  if (in != own && overlaps(in, bytes, recv, n * bytes)) {
    std::memmove(own, in, bytes);
    in = own;
  }
  Slots sl(n);
  for (size_t off = 0; off < bytes; off += a.slot_bytes()) {
    const size_t len = std::min(a.slot_bytes(), bytes - off);
    const uint32_t s = a.begin(len);
    PODNET_RETURN_IF_ERROR(put(c, a, s, in + off, len));
    copy_part_to_output(own + off, in + off, len, n * bytes);  // while the others post
    PODNET_RETURN_IF_ERROR(get_all(c, a, s, len, sl.get()));
    for (int r = 0; r < n; ++r)
      if (r != me) copy_part_to_output(B(recv) + r * bytes + off, sl.get()[r], len, n * bytes);
    a.finish(s);
  }
  return {};
}

Status shm_gather(Call& c, Arena& a, const void* send, void* recv, size_t count, int root) {
  const size_t bytes = count * c.esize();
  return everyone_posts(c, a, send, bytes, c.rank() == root, [&](const std::byte* const* slots) {
    for (int r = 0; r < c.size(); ++r) copy(B(recv) + r * bytes, slots[r], bytes);
  });
}

namespace {

// alltoall with blocks whose n make more than a slot: in parts of slot_bytes / n bytes of
// every block, each an arena call of its own (as allgather above). A part copies every
// input block's range into the slot before it writes that range of any output block, so
// in place needs nothing more; an input that overlaps the output otherwise is copied aside.
Status shm_alltoall_parts(Call& c, Arena& a, const std::byte* in, std::byte* out, size_t bytes) {
  const int n = c.size(), me = c.rank();
  const size_t total = bytes * n, part = std::max<size_t>(1, a.slot_bytes() / n);
  // In place, this part's output ranges were just read into the slot and sit in the cache,
  // where plain stores are cheaper than streaming them out (4 ranks, 64 / 256 MiB in place:
  // 20-28 against 20 ms, 91-102 against 79-81).
  const size_t stream_total = in == out ? 0 : total;
  if (in != out && overlaps(in, total, out, total)) {
    std::byte* saved = c.scratch(total, 0);
    std::memcpy(saved, in, total);
    in = saved;
  }
  Slots sl(n);
  for (size_t off = 0; off < bytes; off += part) {
    const size_t len = std::min(part, bytes - off);
    const uint32_t s = a.begin(len * n);
    PODNET_RETURN_IF_ERROR(a.wait_writable(c, s));
    std::byte* mine = a.slot(me, s, len * n);
    for (int r = 0; r < n; ++r)
      if (r != me) copy(mine + r * len, in + r * bytes + off, len);
    a.post(c, s, len * n);
    copy_part_to_output(out + me * bytes + off, in + me * bytes + off, len, stream_total);  // while the others post
    PODNET_RETURN_IF_ERROR(get_all(c, a, s, len * n, sl.get()));
    for (int r = 0; r < n; ++r)
      if (r != me) copy_part_to_output(out + r * bytes + off, sl.get()[r] + me * len, len, stream_total);
    a.finish(s);
  }
  return {};
}

}  // namespace

Status shm_alltoall(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  // The own block never goes through the slot: it is copied straight to the output (in
  // place it is already there). The others are in the slot before any output is written.
  const int n = c.size(), me = c.rank();
  const size_t bytes = count * c.esize(), total = bytes * n;
  const auto* in = static_cast<const std::byte*>(send);
  if (total > a.slot_bytes()) return shm_alltoall_parts(c, a, in, B(recv), bytes);
  const uint32_t s = a.begin(total);
  PODNET_RETURN_IF_ERROR(a.wait_writable(c, s));
  copy_other_blocks(a.slot(me, s, total), in, bytes, n, me);
  a.post(c, s, total);
  copy(B(recv) + me * bytes, in + me * bytes, bytes);  // while the others post
  Slots sl(n);
  PODNET_RETURN_IF_ERROR(get_all(c, a, s, total, sl.get()));
  for (int r = 0; r < n; ++r)
    if (r != me) copy(B(recv) + r * bytes, sl.get()[r] + me * bytes, bytes);
  a.finish(s);
  return {};
}

namespace {

// The cma algorithms post an address of this rank's memory for call s, and read the peers'.
// Beside the address goes the key of the region this rank allocated around it
// (Context::allocate_memory; 0 for other memory): a peer that maps that region copies with
// memcpy instead of a cross-memory copy (put_to_peer and get_from_peer below).
struct Posted {
  uint64_t addr = 0, key = 0;
};

Posted posted_of(Call& c, const void* p, size_t len) {
  return {reinterpret_cast<uint64_t>(p), c.allocated_key(p, len)};
}

// A small value (addresses) in this rank's slot of call s, for the peers to read.
template <typename T>
Status post_value(Call& c, Arena& a, uint32_t s, const T& v) {
  PODNET_RETURN_IF_ERROR(a.wait_writable(c, s));
  std::memcpy(a.slot(c.rank(), s, sizeof v), &v, sizeof v);
  a.post(c, s, sizeof v);
  return {};
}

template <typename T>
Result<T> posted_value(Call& c, Arena& a, int r, uint32_t s) {
  PODNET_ASSIGN_OR_RETURN(const std::byte* p, a.wait_posted(c, r, s, sizeof(T)));
  T theirs;
  std::memcpy(&theirs, p, sizeof theirs);
  return theirs;
}

Status post_address(Call& c, Arena& a, uint32_t s, const void* p, size_t len) {
  return post_value(c, a, s, posted_of(c, p, len));
}

Result<Posted> posted_address(Call& c, Arena& a, int r, uint32_t s) { return posted_value<Posted>(c, a, r, s); }

// `bytes` from this rank's `from` to rank r's address `at`, inside what r posted as `to`.
// Through the mapping of r's allocated region where this rank has one (the first call that
// meets the region asks r for it: later ones copy through it), else one process_vm_writev.
Status put_to_peer(Call& c, Arena& a, int r, const Posted& to, uint64_t at, const void* from, size_t bytes) {
  if (c.copy_mapped(r, to.key, at, const_cast<void*>(from), bytes, /*read=*/false)) return {};
  return a.write_peer(c, r, at, from, bytes);
}

Status get_from_peer(Call& c, Arena& a, int r, const Posted& from, uint64_t at, void* to, size_t bytes) {
  if (c.copy_mapped(r, from.key, at, to, bytes, /*read=*/true)) return {};
  return a.read_peer(c, r, to, at, bytes);
}

// cma allreduce: bytes of a peer's block read per process_vm_readv into a scratch buffer,
// then folded into the output. Smaller pieces stay in cache, but each read pins its pages
// anew: 2 ranks, 16 MiB, two rounds of 32 / 128 / 512 KiB / 2 MiB pieces: 5.4-6.0 /
// 4.9-5.7 / 4.1-4.2 / 3.8-4.7 ms; 4 ranks 128 KiB / 1 / 4 MiB: 14.0-15.5 / 12.9-15.1 /
// 13.5-13.8 ms.
constexpr size_t kCmaPiece = 1024 * 1024;

// cma allreduce on peers' allocated inputs: the block size from which this rank reduces
// straight out of its mapping of the peer's input instead of copying it into the scratch
// buffer first. 2 ranks, --alloc, three interleaved rounds of -n 200 (allreduce sizes, the
// blocks are half; out of place / in place, us): 16 MiB 1735-1913 / 946-950 reading from
// the mapping against 2351-2407 / 1317-1406 copying first; 4 MiB 178-186 / 163-166 against
// 224-243 / 155-158; 1 MiB 47-49 / 82-96 against 47 / 52-53 (in place, reading a block
// while the peer writes the other half of the same buffer was slower than copying it
// first). Smaller copy pieces (32 / 128 KiB) were slower still at 1 MiB in place (79-108).
constexpr size_t kViewMin = 4u << 20;

// Algorithm "cma" for allgather and alltoall: every rank posts the address of its output;
// each rank writes its part for every peer straight into that peer's output (one
// process_vm_writev per peer, no slot, no messages), says so, and copies its own part;
// then it waits until every rank has finished writing before it returns, since only then
// is its output complete. Writing rather than reading the peers' parts: the source is
// this rank's own input, which its own copy then reads again from cache (2026-12-02, 2
// ranks, allgather, two interleaved rounds, -n 50: 1 / 4 / 16 MiB 51-57 us / 181-199 us /
// 0.96-1.18 ms against 57-64 / 241-244 / 1.63-1.75 reading; Open MPI 54-79 / 191-206 /
// 1.30-1.50; the own copy before the writes: 52-56 / 235-242 / 1.12-1.17). Writing before
// the own copy lets the peers' final wait overlap that copy (measured when it read: 2
// ranks, allgather 1 MiB, four interleaved rounds, 50.3-54.5 against 57.2-68.1 us).
// write(r, to): writes rank r's part, given the address of the output r posted.
template <typename OwnPart, typename Write>
Status cma_exchange(Call& c, Arena& a, void* out, size_t out_bytes, OwnPart&& own_part, Write&& write) {
  const int n = c.size(), me = c.rank();
  const uint32_t s = a.begin(0);
  PODNET_RETURN_IF_ERROR(post_address(c, a, s, out, out_bytes));
  for (int k = 1; k < n; ++k) {
    const int r = (me + k) % n;  // not everyone to rank 0 first
    PODNET_ASSIGN_OR_RETURN(Posted to, posted_address(c, a, r, s));
    PODNET_RETURN_IF_ERROR(write(r, to));
  }
  a.saw_all(s);
  a.finish(s);
  own_part();
  return a.wait_finished(c, s);
}

}  // namespace

Status cma_allgather(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  // An input inside the output (in place: this rank's block, which nobody writes; or
  // anywhere else in it, which the peers' writes could overwrite) is moved to its block
  // first, and goes to the peers from there.
  const size_t bytes = count * c.esize();
  std::byte* own = B(recv) + c.rank() * bytes;
  const auto* in = static_cast<const std::byte*>(send);
  const bool inside = overlaps(in, bytes, recv, c.size() * bytes);
  if (inside && own != in && bytes > 0) std::memmove(own, in, bytes);
  const std::byte* src = inside ? own : in;
  return cma_exchange(
      c, a, recv, c.size() * bytes, [&] { copy_to_output(own, src, bytes); },
      [&](int r, const Posted& to) { return put_to_peer(c, a, r, to, to.addr + c.rank() * bytes, src, bytes); });
}

Status cma_alltoall(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  const int n = c.size(), me = c.rank();
  const size_t es = c.esize(), bytes = count * es;
  const std::byte* src = static_cast<const std::byte*>(send);
  if (send == recv && n > 1 && bytes > 0) {
    // In place, each pair of ranks swaps its two blocks (this rank's block for r and r's
    // for this rank), the lower rank the first half, the higher one the rest: per piece it
    // reads r's part, writes its own over it and puts what it read where its own was. No
    // block is copied aside, and every byte crosses once.
    const size_t piece = std::max<size_t>(1, kCmaPiece / es);
    return cma_exchange(
        c, a, recv, n * bytes, [] {},
        [&](int r, const Posted& at) -> Status {
          const size_t half = count / 2;
          const size_t from = me < r ? 0 : half, to = me < r ? half : count;
          std::byte* mine = B(recv) + static_cast<size_t>(r) * bytes;           // this rank's block for r
          const uint64_t theirs = at.addr + static_cast<uint64_t>(me) * bytes;  // r's block for this rank
          std::byte* bounce = to > from ? c.scratch(std::min(piece, to - from) * es, 0) : nullptr;
          for (size_t i = from; i < to; i += piece) {
            const size_t len = std::min(piece, to - i) * es, off = i * es;
            PODNET_RETURN_IF_ERROR(get_from_peer(c, a, r, at, theirs + off, bounce, len));
            PODNET_RETURN_IF_ERROR(put_to_peer(c, a, r, at, theirs + off, mine + off, len));
            std::memcpy(mine + off, bounce, len);
          }
          return {};
        });
  }
  if (overlaps(send, bytes * n, recv, bytes * n) && n > 1 && bytes > 0) {
    // The peers write into the output, which here holds blocks still to go out: every
    // block goes from a copy, made before this rank posts its output.
    std::byte* saved = c.scratch(bytes * n, 0);
    std::memcpy(saved, src, bytes * n);
    src = saved;
  }
  return cma_exchange(
      c, a, recv, n * bytes, [&] { copy_to_output(B(recv) + me * bytes, src + me * bytes, bytes); },
      [&](int r, const Posted& to) { return put_to_peer(c, a, r, to, to.addr + me * bytes, src + r * bytes, bytes); });
}

Status cma_allreduce(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  // Algorithm "cma": rank r reduces block r of every rank's input and writes it into the
  // peers' outputs: each input byte is read once and each output byte written once per
  // rank, against the arena's copy in, reduction and copy out, and no message, unlike the
  // transport's ring or rabenseifner. The peers' blocks come by cross-memory attach in
  // pieces (kCmaPiece), each folded into the output from cache and written to the peers
  // from there. Where an output is memory a rank allocated (Context::allocate_memory), the
  // reduced blocks are instead read from the peers' outputs once all are done (phase 2):
  // through the mappings, writing measured slower out of place.
  const int n = c.size(), me = c.rank();
  const size_t es = c.esize();
  const size_t my_off = block_off(count, n, me), my_cnt = block_cnt(count, n, me);
  const auto* in = static_cast<const std::byte*>(send);
  std::byte* out = B(recv);
  struct Buffers {
    Posted in, out;
  };
  std::vector<Buffers> peer(n);
  // Phase 1: every rank posts its input and output; this rank folds the peers' block `me`
  // into its own and writes each reduced piece into the peers' outputs. In place, a piece
  // of a peer's buffer is written by this rank only after this rank read it, and no one
  // else reads it; without the writes the peers read blocks of this rank's buffer that it
  // does not write until they have finished phase 1 (so they are done reading).
  const uint32_t s1 = a.begin(0);
  const Buffers mine{posted_of(c, send, count * es), posted_of(c, recv, count * es)};
  PODNET_RETURN_IF_ERROR(post_value(c, a, s1, mine));
  bool write = mine.out.key == 0;  // the same on every rank: all see every rank's output
  for (int k = 1; k < n; ++k) {
    const int r = (me + k) % n;
    PODNET_ASSIGN_OR_RETURN(peer[r], posted_value<Buffers>(c, a, r, s1));
    write = write && peer[r].out.key == 0;
  }
  a.saw_all(s1);
  // From kViewMin, a peer's input in memory it allocated and this rank maps is folded in
  // where it lies (no copy); the others' come piece by piece through a scratch buffer.
  std::vector<std::shared_ptr<const std::byte>> view(n);
  for (int k = 1; k < n && my_cnt * es >= kViewMin; ++k) {
    const int r = (me + k) % n;
    view[r] = c.view_mapped(r, peer[r].in.key, peer[r].in.addr + my_off * es, my_cnt * es);
  }
  const size_t piece = std::max<size_t>(1, kCmaPiece / es);
  // An arena has at least two ranks, so every piece folds in at least one peer's.
  std::byte* bounce = my_cnt > 0 ? c.scratch(std::min(piece, my_cnt) * es, 0) : nullptr;
  for (size_t done = 0; done < my_cnt; done += piece) {
    const size_t cnt = std::min(piece, my_cnt - done), at = (my_off + done) * es;
    for (int k = 1; k < n; ++k) {
      const int r = (me + k) % n;
      const std::byte* theirs = bounce;
      if (view[r]) theirs = view[r].get() + done * es;
      else
        PODNET_RETURN_IF_ERROR(get_from_peer(c, a, r, peer[r].in, peer[r].in.addr + at, bounce, cnt * es));
      // The own input first: in place it is the output, read before it is written.
      if (k == 1)
        c.reduce3(out + at, in + at, theirs, cnt);
      else
        c.reduce(out + at, theirs, cnt);
    }
    if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), out + at, cnt, n);
    for (int k = 1; k < n && write; ++k) {
      const int r = (me + k) % n;
      PODNET_RETURN_IF_ERROR(put_to_peer(c, a, r, peer[r].out, peer[r].out.addr + at, out + at, cnt * es));
    }
  }
  a.finish(s1);
  PODNET_RETURN_IF_ERROR(a.wait_finished(c, s1));
  if (write) return {};
  // Phase 2, once every rank has finished phase 1 (its block reduced, its reads of this
  // rank's input done): this rank reads the peers' reduced blocks from the outputs they
  // posted in phase 1, then waits until they have read its own (call s2, nothing posted).
  for (int k = 1; k < n; ++k) {
    const int r = (me + k) % n;
    const size_t at = block_off(count, n, r) * es;
    PODNET_RETURN_IF_ERROR(
        get_from_peer(c, a, r, peer[r].out, peer[r].out.addr + at, out + at, block_cnt(count, n, r) * es));
  }
  const uint32_t s2 = a.begin(0);
  a.finish(s2);
  return a.wait_finished(c, s2);
}

Status shm_barrier(Call& c, Arena& a) {
  return everyone_posts(c, a, nullptr, 0, true, [](const std::byte* const*) {});
}

Status shm_broadcast(Call& c, Arena& a, const void* send, void* buf, size_t count, int root) {
  const size_t bytes = count * c.esize();
  // Only the root's `send` is read (root_posts); the root copies from its slot, once posted.
  return root_posts(c, a, send, bytes, root, [&](const std::byte* src) {
    if (c.rank() != root || send != buf) copy(buf, src, bytes);
  });
}

Status shm_scatter(Call& c, Arena& a, const void* send, void* recv, size_t count, int root) {
  const size_t bytes = count * c.esize();
  return root_posts(c, a, send, bytes * c.size(), root,
                    [&](const std::byte* src) { copy(recv, src + c.rank() * bytes, bytes); });
}

}  // namespace podnet::detail::algo
