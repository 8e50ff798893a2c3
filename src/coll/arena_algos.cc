// Collectives through the shared collective arena (coll/arena.h): every rank copies its
// input into its own slot, posts it, and reads the slots it needs. Because every input is
// copied before any output is written, in-place calls need no special case. Reductions
// combine the slots in rank order, so every rank computes bitwise identical results.
#include <cstring>

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
  const uint32_t s = a.begin();
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
  const uint32_t s = a.begin();
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

}  // namespace

Status shm_allreduce(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  return everyone_posts(c, a, send, count * c.esize(), true,
                        [&](const std::byte* const* slots) { reduce_slots(c, recv, slots, 0, count); });
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
  const size_t bytes = count * c.esize();
  return everyone_posts(c, a, send, bytes, true, [&](const std::byte* const* slots) {
    for (int r = 0; r < c.size(); ++r) copy(B(recv) + r * bytes, slots[r], bytes);
  });
}

Status shm_gather(Call& c, Arena& a, const void* send, void* recv, size_t count, int root) {
  const size_t bytes = count * c.esize();
  return everyone_posts(c, a, send, bytes, c.rank() == root, [&](const std::byte* const* slots) {
    for (int r = 0; r < c.size(); ++r) copy(B(recv) + r * bytes, slots[r], bytes);
  });
}

Status shm_alltoall(Call& c, Arena& a, const void* send, void* recv, size_t count) {
  const size_t bytes = count * c.esize();
  return everyone_posts(c, a, send, bytes * c.size(), true, [&](const std::byte* const* slots) {
    for (int r = 0; r < c.size(); ++r) copy(B(recv) + r * bytes, slots[r] + c.rank() * bytes, bytes);
  });
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
