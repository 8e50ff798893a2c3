// allgather, reduce_scatter, alltoall and barrier algorithms.
#include <cstring>
#include <vector>

#include "base/copy.h"
#include "coll/algorithms.h"
#include "coll/reduce_kernels.h"

namespace podnet::detail::algo {
namespace {
std::byte* B(void* p) { return static_cast<std::byte*>(p); }
const std::byte* B(const void* p) { return static_cast<const std::byte*>(p); }
int mod(int a, int n) { return ((a % n) + n) % n; }
// Where an exchange sends from: in place, the blocks still to be sent would be overwritten by
// the ones received, so a copy of the `bytes` of input in scratch buffer 0.
const std::byte* send_source(Call& c, const void* send, const void* recv, size_t bytes) {
  if (send != recv) return B(send);
  std::byte* copy = c.scratch(bytes, 0);
  if (bytes > 0) std::memcpy(copy, send, bytes);
  return copy;
}
}  // namespace

namespace {

// Posts a receive of `bytes` from every other rank (into recv_at(rank)) and a send to every
// other rank (from send_at(rank)) at once, with step tag `tag`; runs own() while they move,
// then waits for all of them.
template <typename RecvAt, typename SendAt, typename Own>
Status exchange_with_all(Call& c, size_t bytes, uint32_t tag, RecvAt&& recv_at, SendAt&& send_at, Own&& own) {
  const int n = c.size(), r = c.rank();
  std::vector<Request> recvs, sends;
  recvs.reserve(n);
  sends.reserve(n);
  for (int k = 1; k < n; ++k) {
    const int from = mod(r - k, n);
    recvs.push_back(c.irecv(from, recv_at(from), bytes, tag));
  }
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n);
    sends.push_back(c.isend_exchange(to, send_at(to), bytes, tag));
  }
  own();
  for (int k = 1; k < n; ++k) PODNET_RETURN_IF_ERROR(c.wait_recv(recvs[k - 1], mod(r - k, n), bytes));
  for (int k = 1; k < n; ++k) PODNET_RETURN_IF_ERROR(c.wait_send(sends[k - 1], mod(r + k, n)));
  return {};
}

}  // namespace

namespace {
// The ring on slow links: each block in ring_chunk() pieces, every piece passed on as soon as
// it arrived, so that the n-1 steps overlap instead of each waiting for the whole block (lab
// hosts at 1 Gbit/s, two interleaved rounds: 4 hosts 4 MiB 26.5-26.9 against 32.8-33.7 ms,
// 16 MiB 107 against 111-115; 8 hosts 4 MiB 32.0-34.1 against 38.6-41.9, 16 MiB 129-131
// against 138-142; docs/collectives.md).
Status allgather_ring_pipelined(Call& c, const void* send, void* recv, size_t count) {
  const int n = c.size(), r = c.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t es = c.esize(), bytes = count * es;
  std::byte* own = B(recv) + r * bytes;
  if (own != send) std::memmove(own, send, bytes);  // the input may overlap its place in the output
  const size_t chunk = ring_chunk(bytes, es), nchunks = chunks_in(bytes, chunk);
  auto len_of = [&](size_t k) { return chunk_len(bytes, chunk, k); };
  std::vector<std::vector<Request>> recvs(n - 1), sends(n - 1);
  auto post_recvs = [&](int s) {  // one step ahead: the matcher's queue stays short
    std::byte* block = B(recv) + mod(r - s - 1, n) * bytes;
    for (size_t k = 0; k < nchunks; ++k) recvs[s].push_back(c.irecv(left, block + k * chunk, len_of(k), ring_tag(s, k)));
  };
  post_recvs(0);
  for (size_t k = 0; k < nchunks; ++k)
    sends[0].push_back(c.isend_exchange(right, own + k * chunk, len_of(k), ring_tag(0, k)));
  for (int s = 0; s < n - 1; ++s) {
    if (s + 1 < n - 1) post_recvs(s + 1);
    std::byte* block = B(recv) + mod(r - s - 1, n) * bytes;
    for (size_t k = 0; k < nchunks; ++k) {
      PODNET_RETURN_IF_ERROR(c.wait_recv(recvs[s][k], left, len_of(k)));
      if (s + 1 < n - 1)
        sends[s + 1].push_back(c.isend_exchange(right, block + k * chunk, len_of(k), ring_tag(s + 1, k)));
    }
  }
  for (auto& step : sends)
    for (Request& q : step) PODNET_RETURN_IF_ERROR(c.wait_send(q, right));
  return {};
}
}  // namespace

Status allgather_ring(Call& c, const void* send, void* recv, size_t count, bool pipelined) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  if (pipelined && n > 2 && bytes > ring_chunk(bytes, c.esize())) return allgather_ring_pipelined(c, send, recv, count);
  std::byte* own = B(recv) + r * bytes;
  const std::byte* in = static_cast<const std::byte*>(send);
  int s = 0;
  if (n > 1 && bytes > 0 && !overlaps(in, bytes, recv, n * bytes)) {
    // Out of place, no overlap: the first step sends straight from the input, and the copy
    // of the own block runs while the transfers are in flight (the peer then reads the
    // user's clean buffer, not a block this core has just dirtied).
    Request rr = c.irecv(mod(r - 1, n), B(recv) + mod(r - 1, n) * bytes, bytes, 0);
    Request sr = c.isend_exchange(mod(r + 1, n), in, bytes, 0);
    copy_to_output(own, in, bytes);
    PODNET_RETURN_IF_ERROR(c.wait_recv(rr, mod(r - 1, n), bytes));
    PODNET_RETURN_IF_ERROR(c.wait_send(sr, mod(r + 1, n)));
    s = 1;
  } else if (own != in && bytes > 0) {
    std::memmove(own, in, bytes);  // the input may overlap its place in the output
  }
  for (; s < n - 1; ++s) {
    int sb = mod(r - s, n), rb = mod(r - s - 1, n);
    PODNET_RETURN_IF_ERROR(c.sendrecv(mod(r + 1, n), B(recv) + sb * bytes, bytes, mod(r - 1, n),
                                      B(recv) + rb * bytes, bytes, static_cast<uint32_t>(s)));
  }
  return {};
}

Status allgather_linear(Call& c, const void* send, void* recv, size_t count) {
  // Every rank sends its block to every other at once: one round instead of the ring's n-1,
  // the same bytes per rank (over shm each is one single copy by the reader).
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  std::byte* own = B(recv) + r * bytes;
  const std::byte* in = static_cast<const std::byte*>(send);
  const bool overlap = overlaps(in, bytes, recv, n * bytes);
  if (overlap && own != in && bytes > 0) std::memmove(own, in, bytes);
  const std::byte* src = overlap ? own : in;
  return exchange_with_all(
      c, bytes, 0, [&](int from) { return B(recv) + from * bytes; }, [&](int) { return src; },
      // The own block while the others move (the peers read the user's clean input).
      [&] { if (!overlap) copy_to_output(own, in, bytes); });
}

Status allgatherv_ring(Call& c, const void* send, void* recv, const std::vector<size_t>& counts) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.esize();
  std::vector<size_t> off(n + 1, 0);
  for (int i = 0; i < n; ++i) off[i + 1] = off[i] + counts[i];
  // memmove: the input may overlap its place in the output (send == recv, say).
  if (B(recv) + off[r] * es != send && counts[r] > 0) std::memmove(B(recv) + off[r] * es, send, counts[r] * es);
  for (int s = 0; s < n - 1; ++s) {
    int sb = mod(r - s, n), rb = mod(r - s - 1, n);
    PODNET_RETURN_IF_ERROR(c.sendrecv(mod(r + 1, n), B(recv) + off[sb] * es, counts[sb] * es, mod(r - 1, n),
                                      B(recv) + off[rb] * es, counts[rb] * es, static_cast<uint32_t>(s)));
  }
  return {};
}

Status allgather_bruck(Call& c, const void* send, void* recv, size_t count) {
  // log2(n) rounds for any n: gather into a rotated buffer, then rotate into place.
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  std::byte* tmp = c.scratch(bytes * n, 0);
  if (bytes > 0) std::memcpy(tmp, send, bytes);
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, ++step) {
    int blocks = std::min(k, n - k);
    PODNET_RETURN_IF_ERROR(c.sendrecv(mod(r - k, n), tmp, blocks * bytes, mod(r + k, n), tmp + k * bytes,
                                      blocks * bytes, step));
  }
  for (int i = 0; i < n && bytes > 0; ++i) std::memcpy(B(recv) + mod(r + i, n) * bytes, tmp + i * bytes, bytes);
  return {};
}

Status allgather_recursive_doubling(Call& c, const void* send, void* recv, size_t count) {
  // Power-of-two groups only exchange doubling ranges; other sizes use Bruck's schedule,
  // which is the generalisation of recursive doubling to any n.
  const int n = c.size(), r = c.rank();
  if ((n & (n - 1)) != 0) return allgather_bruck(c, send, recv, count);
  const size_t bytes = count * c.esize();
  if (B(recv) + r * bytes != send && bytes > 0) std::memcpy(B(recv) + r * bytes, send, bytes);
  uint32_t step = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++step) {
    int peer = r ^ mask;
    int my_lo = r & ~(mask - 1), peer_lo = peer & ~(mask - 1);
    PODNET_RETURN_IF_ERROR(c.sendrecv(peer, B(recv) + my_lo * bytes, mask * bytes, peer, B(recv) + peer_lo * bytes,
                                      mask * bytes, step));
  }
  return {};
}

Status reduce_scatter_ring(Call& c, const void* send, void* recv, size_t count, bool pipelined) {
  // The reduce-scatter half of ring allreduce (allreduce_ring), shifted so that rank r ends
  // with block r: at step s a rank passes on its partial sum of block r-s-1 and receives
  // block r-s-2. Each block's first send comes straight from the input; partial sums live in
  // a scratch copy of the block layout until they have been sent. `pipelined`: in chunks
  // (ring_chunk), so that a chunk is reduced and passed on while the next ones are on the
  // wire; that pays where the links, not the CPUs, are the limit (4 lab hosts at 1 Gbit/s,
  // two interleaved rounds: 16 MiB 107 against 125 ms whole, 64 MiB 424 against 476-487),
  // and costs on loopback, where the copies are the wire (4 ranks on 2 CPUs, three rounds:
  // 4 MiB 6.2-7.0 against 3.2-4.4 ms), so elsewhere each block goes in one message.
  const int n = c.size(), r = c.rank();
  const size_t es = c.esize(), bytes = count * es;
  const std::byte* in = static_cast<const std::byte*>(send);
  if (n == 1) {
    if (recv != send && bytes > 0) std::memmove(recv, send, bytes);
    if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), recv, count, n);
    return {};
  }
  const int right = mod(r + 1, n), left = mod(r - 1, n), steps = n - 1;
  const size_t chunk = pipelined ? ring_chunk(bytes, es) : std::max<size_t>(bytes, 1);
  const size_t nchunks = chunks_in(bytes, chunk);
  auto len_of = [&](size_t k) { return chunk_len(bytes, chunk, k); };
  std::byte* work = c.scratch(bytes * n, 0);
  // The result goes straight to recv unless recv lies inside the input anywhere but on this
  // rank's own block (in place, recv == send: block 0), whose input may still be read or
  // on its way to the right then; it is copied there at the end.
  const bool direct = !overlaps(recv, bytes, send, bytes * n) || recv == in + r * bytes;
  std::byte* result = direct ? B(recv) : work + r * bytes;
  // Step s reduces into dst_of(s), and the partial sums it receives land there too, to be
  // reduced in place with the input (as allreduce's receive_into): no scratch beside `work`
  // (over tcp, three interleaved rounds, out of place: 2 ranks 2 MiB 341-345 -> 285-288 us,
  // 4 ranks 8 MiB 4.8-5.0 -> 3.8-4.3 ms). Except where the last step's destination is this
  // rank's own input block (in place), which that step still reads.
  auto dst_of = [&](int s) { return s + 1 < steps ? work + mod(r - s - 2, n) * bytes : result; };
  const bool last_in_input = result == in + r * bytes;
  std::byte* last_tmp = last_in_input ? c.scratch(bytes, 1) : nullptr;
  auto recv_of = [&](int s) { return s + 1 == steps && last_in_input ? last_tmp : dst_of(s); };

  std::vector<std::vector<Request>> sends(steps), recvs(steps);
  auto post_recvs = [&](int s) {
    for (size_t k = 0; k < nchunks; ++k) recvs[s].push_back(c.irecv(left, recv_of(s) + k * chunk, len_of(k), ring_tag(s, k)));
  };
  post_recvs(0);
  const std::byte* first = in + mod(r - 1, n) * bytes;
  for (size_t k = 0; k < nchunks; ++k)
    sends[0].push_back(c.isend_exchange(right, first + k * chunk, len_of(k), ring_tag(0, k)));
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) post_recvs(s + 1);  // into a block nothing has written yet
    const int rb = mod(r - s - 2, n);
    std::byte* dst = dst_of(s);
    for (size_t k = 0; k < nchunks; ++k) {
      const size_t len = len_of(k);
      PODNET_RETURN_IF_ERROR(c.wait_recv(recvs[s][k], left, len));
      c.reduce3(dst + k * chunk, in + rb * bytes + k * chunk, recv_of(s) + k * chunk, len / es);
      if (s + 1 < steps) sends[s + 1].push_back(c.isend_exchange(right, dst + k * chunk, len, ring_tag(s + 1, k)));
    }
  }
  for (auto& step : sends)
    for (Request& q : step) PODNET_RETURN_IF_ERROR(c.wait_send(q, right));
  if (!direct && bytes > 0) std::memcpy(recv, result, bytes);
  if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), recv, count, n);
  return {};
}

Status reduce_scatter_recursive_halving(Call& c, const void* send, void* recv, size_t count) {
  // Power-of-two groups halve the range each round; other sizes (and one rank: a copy) use
  // the ring.
  const int n = c.size(), r = c.rank();
  if (n == 1 || (n & (n - 1)) != 0) return reduce_scatter_ring(c, send, recv, count, false);
  const size_t bytes = count * c.esize();
  const std::byte* in = B(send);
  // The first round sends from the input and reduces the half it keeps from the input into
  // `work`, the later ones work there; the last writes this rank's block straight to recv
  // (in place, recv is the input's own block, which only the first round reads). No copy of
  // the whole input first, none of the result at the end.
  std::byte* work = c.scratch(bytes * n, 0);
  std::byte* tmp = c.scratch(bytes * n / 2 + 1, 1);
  const bool direct = !overlaps(recv, bytes, send, bytes * n) || recv == in + r * bytes;
  int lo = 0, hi = n;
  uint32_t step = 0;
  for (int mask = n / 2; mask >= 1; mask /= 2, ++step) {
    const bool first = mask == n / 2, last = mask == 1;
    const std::byte* src = first ? in : work;
    int peer = r ^ mask, mid = (lo + hi) / 2;
    bool keep_low = (r & mask) == 0;
    int klo = keep_low ? lo : mid, glo = keep_low ? mid : lo;
    PODNET_RETURN_IF_ERROR(c.sendrecv(peer, src + glo * bytes, mask * bytes, peer, tmp, mask * bytes, step));
    // The last round keeps this rank's own block (klo == r).
    std::byte* out = last && direct ? B(recv) : work + klo * bytes;
    // The lower rank's partial sum first, on both sides of every exchange.
    if (peer < r) c.reduce3(out, tmp, src + klo * bytes, count * mask);
    else c.reduce3(out, src + klo * bytes, tmp, count * mask);
    lo = klo;
    hi = klo + mask;
  }
  if (!direct && bytes > 0) std::memcpy(recv, work + r * bytes, bytes);
  if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), recv, count, n);
  return {};
}

Status alltoall_pairwise(Call& c, const void* send, void* recv, size_t count) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  const std::byte* src = send_source(c, send, recv, bytes * n);
  copy_to_output(B(recv) + r * bytes, src + r * bytes, bytes);
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n), from = mod(r - k, n);
    PODNET_RETURN_IF_ERROR(c.sendrecv(to, src + to * bytes, bytes, from, B(recv) + from * bytes, bytes,
                                      static_cast<uint32_t>(k)));
  }
  return {};
}

// Every receive and every send posted at once, then waited for: no step waits for a pair to
// finish the previous one (pairwise does), so a rank that is late (oversubscribed cores) or a
// slow pair holds up only its own blocks. Over shm each block is one cross-memory copy that
// the receiver starts as soon as the request to send arrives. Sends go to r+1, r+2, ... so
// that the ranks do not all start with the same peer.
Status alltoall_linear(Call& c, const void* send, void* recv, size_t count) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  const bool in_place = send == recv;
  const std::byte* src = B(send);
  if (in_place && n > 1 && bytes > 0) {
    // The receives overwrite the blocks that go out: those (not the own block, which stays
    // where it is) are copied aside first.
    std::byte* saved = c.scratch(bytes * n, 0);
    copy_other_blocks(saved, B(recv), bytes, n, r);
    src = saved;
  }
  return exchange_with_all(
      c, bytes, 1, [&](int from) { return B(recv) + from * bytes; }, [&](int to) { return src + to * bytes; },
      // The own block while the others move.
      [&] { if (!in_place) copy_to_output(B(recv) + r * bytes, src + r * bytes, bytes); });
}

Status alltoallv_pairwise(Call& c, const void* send, const std::vector<size_t>& scounts, void* recv,
                          const std::vector<size_t>& rcounts) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.esize();
  std::vector<size_t> so(n + 1, 0), ro(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    so[i + 1] = so[i] + scounts[i];
    ro[i + 1] = ro[i] + rcounts[i];
  }
  if (scounts[r] != rcounts[r])
    return c.fail(Status::InvalidArgument("alltoallv: rank {} sends itself {} elements but expects {}", r, scounts[r],
                                          rcounts[r]));
  const std::byte* src = send_source(c, send, recv, so[n] * es);
  if (rcounts[r] > 0) std::memcpy(B(recv) + ro[r] * es, src + so[r] * es, rcounts[r] * es);
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n), from = mod(r - k, n);
    PODNET_RETURN_IF_ERROR(c.sendrecv(to, src + so[to] * es, scounts[to] * es, from, B(recv) + ro[from] * es,
                                      rcounts[from] * es, static_cast<uint32_t>(k)));
  }
  return {};
}

Status alltoall_bruck(Call& c, const void* send, void* recv, size_t count) {
  // log2(n) rounds for small blocks: rotate, exchange the blocks whose index has bit k set,
  // rotate back.
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  std::byte* tmp = c.scratch(bytes * n, 0);
  std::byte* pack = c.scratch(bytes * n, 1);
  std::byte* unpack = c.scratch(bytes * n, 2);
  for (int i = 0; i < n && bytes > 0; ++i) std::memcpy(tmp + i * bytes, B(send) + mod(r + i, n) * bytes, bytes);
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, ++step) {
    std::vector<int> idx;
    for (int i = 0; i < n; ++i)
      if (i & k) idx.push_back(i);
    for (size_t j = 0; j < idx.size() && bytes > 0; ++j) std::memcpy(pack + j * bytes, tmp + idx[j] * bytes, bytes);
    PODNET_RETURN_IF_ERROR(c.sendrecv(mod(r + k, n), pack, idx.size() * bytes, mod(r - k, n), unpack,
                                      idx.size() * bytes, step));
    for (size_t j = 0; j < idx.size() && bytes > 0; ++j) std::memcpy(tmp + idx[j] * bytes, unpack + j * bytes, bytes);
  }
  for (int i = 0; i < n && bytes > 0; ++i) std::memcpy(B(recv) + mod(r - i, n) * bytes, tmp + i * bytes, bytes);
  return {};
}

Status barrier_dissemination(Call& c) {
  const int n = c.size(), r = c.rank();
  uint8_t out = 1, in = 0;
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, ++step)
    PODNET_RETURN_IF_ERROR(c.sendrecv(mod(r + k, n), &out, 1, mod(r - k, n), &in, 1, step));
  return {};
}

}  // namespace podnet::detail::algo
