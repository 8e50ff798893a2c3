// Rooted collectives: reduce, broadcast, gather, scatter.
#include <cstring>
#include <vector>

#include "base/copy.h"
#include "coll/algorithms.h"
#include "coll/reduce_kernels.h"

namespace podnet::detail::algo {
namespace {
std::byte* B(void* p) { return static_cast<std::byte*>(p); }
const std::byte* B(const void* p) { return static_cast<const std::byte*>(p); }
}  // namespace

Status reduce_binomial(Call& c, const void* send, void* recv, size_t count, int root) {
  const int n = c.size();
  const size_t bytes = count * c.esize();
  const int vr = (c.rank() - root + n) % n;
  // Accumulate in recv at the root (it may alias send), in scratch elsewhere.
  std::byte* acc = c.rank() == root ? B(recv) : c.scratch(bytes, 2);
  if (acc != send && bytes > 0) std::memcpy(acc, send, bytes);
  std::byte* tmp = c.scratch(bytes, 3);
  // Children are vr + mask for the masks below vr's lowest set bit; the data of higher
  // virtual ranks is combined after ours, the same order whatever the root.
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (vr & mask) {
      int parent = ((vr - mask) + root) % n;
      PODNET_RETURN_IF_ERROR(c.send(parent, acc, bytes, static_cast<uint32_t>(mask)));
      break;
    }
    int child_vr = vr + mask;
    if (child_vr < n) {
      int child = (child_vr + root) % n;
      PODNET_RETURN_IF_ERROR(c.recv(child, tmp, bytes, static_cast<uint32_t>(mask)));
      c.reduce(acc, tmp, count);
    }
  }
  if (c.rank() == root && c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), recv, count, n);
  return {};
}

Status broadcast_binomial(Call& c, const void* send, void* buf, size_t count, int root) {
  const int n = c.size();
  const size_t bytes = count * c.esize();
  const int vr = (c.rank() - root + n) % n;
  const void* src = vr == 0 ? send : buf;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      PODNET_RETURN_IF_ERROR(c.recv(((vr - mask) + root) % n, buf, bytes, 200));
      break;
    }
    mask <<= 1;
  }
  // Out of place, the root copies its input into its output while the sends move: its
  // children then copy their messages whole (no split copy giving the root half of each).
  const bool own_copy = src != buf;
  std::vector<std::pair<int, Request>> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) {
      int child = (vr + mask + root) % n;
      sends.emplace_back(child, own_copy ? c.isend_whole(child, src, bytes, 200) : c.isend(child, src, bytes, 200));
    }
  }
  if (own_copy) copy_to_output(buf, src, bytes);  // out of place, at the root
  for (auto& [p, r] : sends) PODNET_RETURN_IF_ERROR(c.wait_send(r, p));
  return {};
}

Status broadcast_chain(Call& c, const void* send, void* buf, size_t count, int root) {
  // root -> root+1 -> ... in chunks: every link is busy at once once the pipe is full.
  const int n = c.size();
  const size_t bytes = count * c.esize();
  const int vr = (c.rank() - root + n) % n;
  const int prev = (c.rank() - 1 + n) % n, next = (c.rank() + 1) % n;
  const size_t chunk = kPipelineChunk;
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  if (nchunks > 65535) return c.fail(Status::InvalidArgument("broadcast of {} bytes: too many chunks", bytes));
  std::vector<Request> rr(nchunks), sr;
  const std::byte* from = vr == 0 ? B(send) : B(buf);  // the root sends from its input
  // Out of place the root copies into its output meanwhile: the next rank copies whole.
  const bool own_copy = vr == 0 && send != buf;
  if (vr != 0)
    for (size_t k = 0; k < nchunks; ++k) {
      size_t off = k * chunk, len = std::min(chunk, bytes - std::min(bytes, off));
      rr[k] = c.irecv(prev, B(buf) + off, len, static_cast<uint32_t>(k));
    }
  for (size_t k = 0; k < nchunks; ++k) {
    size_t off = k * chunk, len = std::min(chunk, bytes - std::min(bytes, off));
    if (vr != 0) PODNET_RETURN_IF_ERROR(c.wait_recv(rr[k], prev, len));
    if (vr == n - 1) continue;
    const uint32_t step = static_cast<uint32_t>(k);
    sr.push_back(own_copy ? c.isend_whole(next, from + off, len, step) : c.isend(next, from + off, len, step));
  }
  if (own_copy) copy_to_output(buf, send, bytes);  // out of place, at the root
  for (auto& r : sr) PODNET_RETURN_IF_ERROR(c.wait_send(r, next));
  return {};
}

Status gather_linear(Call& c, const void* send, void* recv, size_t count, int root) {
  const int n = c.size();
  const size_t bytes = count * c.esize();
  if (c.rank() != root) return c.send(root, send, bytes, 0);
  std::byte* own = B(recv) + root * bytes;
  // The root's input may lie anywhere in its output (send == recv, say): keep a copy before
  // the other ranks' blocks land on it.
  const std::byte* src = B(send);
  bool overlaps = src < B(recv) + n * bytes && src + bytes > B(recv);
  if (overlaps && src != own && bytes > 0) {
    std::byte* tmp = c.scratch(bytes, 0);
    std::memcpy(tmp, src, bytes);
    src = tmp;
  }
  std::vector<Request> rr(n);
  for (int p = 0; p < n; ++p)
    if (p != root) rr[p] = c.irecv(p, B(recv) + p * bytes, bytes, 0);
  for (int p = 0; p < n; ++p)
    if (p != root) PODNET_RETURN_IF_ERROR(c.wait_recv(rr[p], p, bytes));
  copy_to_output(own, src, bytes);
  return {};
}

Status scatter_linear(Call& c, const void* send, void* recv, size_t count, int root) {
  const int n = c.size();
  const size_t bytes = count * c.esize();
  if (c.rank() != root) return c.recv(root, recv, bytes, 0);
  std::vector<Request> sr(n);
  for (int p = 0; p < n; ++p)
    if (p != root) sr[p] = c.isend(p, B(send) + p * bytes, bytes, 0);
  for (int p = 0; p < n; ++p)
    if (p != root) PODNET_RETURN_IF_ERROR(c.wait_send(sr[p], p));
  // Only now: the root's output may overlap the blocks it was sending (recv == send).
  if (B(send) + root * bytes != recv && bytes > 0) std::memmove(recv, B(send) + root * bytes, bytes);
  return {};
}

}  // namespace podnet::detail::algo
