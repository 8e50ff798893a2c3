// allreduce algorithms. Every rank ends with bitwise identical results: each element is
// reduced in the same order on every rank (or reduced once and then copied).
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/small_vector.h"
#include "coll/algorithms.h"
#include "coll/reduce_kernels.h"

namespace podnet::detail::algo {
namespace {

std::byte* B(void* p) { return static_cast<std::byte*>(p); }

void copy_in(const void* send, void* recv, size_t bytes) {
  if (send != recv && bytes > 0) std::memcpy(recv, send, bytes);
}

void finalize(Call& c, void* buf, size_t count) {
  if (c.op() == ReduceOp::kAvg) coll::finalize_avg(c.dtype(), buf, count, c.size());
}


// Where a peer's data for a reduction into `out` is received. While this rank's data is
// still the caller's input (`data` is not the output `buf`: out of place, before the first
// reduction), straight into `out`, reduced there with the input: the call then touches no
// scratch memory, only the input and the output (2 ranks over tcp, rabenseifner out of
// place, three interleaved rounds: 1 / 2 MiB 282-286 / 573-587 us -> 258-263 / 501-517,
// the in-place figures). Otherwise `out` holds this rank's own data: into scratch buffer
// `which` of `scratch_bytes`. The kernels allow their output to be one of their inputs.
std::byte* receive_into(Call& c, const void* data, const void* buf, std::byte* out, size_t scratch_bytes, int which) {
  return data != buf ? out : c.scratch(scratch_bytes, which);
}

// Folds a non-power-of-two group onto the largest power of two p2: the first 2*rem ranks
// pair up (even sends its data to odd). `in` is this rank's vector (the input, or buf in
// place); on return *data says where it is now: buf where the fold reduced into it, else
// still `in` (nothing is copied: the first exchange reads the input). Returns the rank
// inside the power-of-two group, or -1 for a rank that sits out until the result comes back.
int fold_in(Call& c, const void* in, void* buf, size_t count, int p2, Status& st, const std::byte** data) {
  int rank = c.rank(), rem = c.size() - p2;
  size_t bytes = count * c.esize();
  *data = static_cast<const std::byte*>(in);
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      st = c.send(rank + 1, in, bytes, 0);
      return -1;
    }
    // Out of place the partner's vector lands in the output itself (see receive_into).
    std::byte* into = receive_into(c, in, buf, B(buf), bytes, 1);
    st = c.recv(rank - 1, into, bytes, 0);
    // Reduce as (lower rank, higher rank) so every rank's order is the same.
    if (st.ok()) c.reduce3(buf, into, in, count);
    *data = B(buf);
    return rank / 2;
  }
  return rank - rem;
}

Status fold_out(Call& c, void* buf, size_t count, int p2, uint32_t step) {
  int rank = c.rank(), rem = c.size() - p2;
  size_t bytes = count * c.esize();
  if (rank >= 2 * rem) return {};
  if (rank % 2 == 1) return c.send(rank - 1, buf, bytes, step);
  return c.recv(rank + 1, buf, bytes, step);
}

int real_rank(int newrank, int rem) { return newrank < rem ? newrank * 2 + 1 : newrank + rem; }

int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

// Ring: a reduce-scatter then an allgather, n-1 steps each, every block cut into chunks.
// The steps are pipelined: a chunk is forwarded to the right as soon as it has been reduced
// (or, in the allgather, received), instead of after the whole step, so there is no pause
// between steps. A pause costs a rendezvous round trip through the queues of both links per
// step: milliseconds on a loaded rate-limited link (measured in a `podnet lab` of 8 hosts at
// 1 Gbit/s: 4 MiB went from 0.24 to 0.8-0.9 of the link rate with this and the chunk sizes).
//
// Step s of the reduce-scatter sends block r-s and receives block r-s-1 into a scratch buffer
// (two alternate) to reduce it in place; block r-s-1 is what step s+1 sends. Step s of the
// allgather sends block r+1-s (the fully reduced block r+1 first) and receives block r-s,
// which is what step s+1 sends. Block r-s was sent in reduce-scatter step s, so its allgather
// receive is posted only once that send is done.
//
// Out of place, the input is never copied to the output first: step 0 sends block r from the
// input, each reduction reads the own part from the input and writes the output, and block r
// of the output is first written by the allgather (which brings it fully reduced).
Status allreduce_ring(Call& c, const void* send, void* recv, size_t count) {
  const int n = c.size(), r = c.rank();
  const size_t es = c.esize();
  if (n == 1) {
    copy_in(send, recv, count * es);
    finalize(c, recv, count);
    return {};
  }
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  auto mod = [n](int x) { return (x % n + n) % n; };
  const size_t max_block = block_cnt(count, n, 0) * es;
  const size_t chunk = ring_chunk(max_block, es);
  // Out of place a block's partial sums land in its place in the output (receive_into);
  // in place, in two alternating scratch buffers.
  const bool direct = send != recv;
  std::byte* tmp[2] = {direct ? nullptr : c.scratch(max_block, 0), direct ? nullptr : c.scratch(max_block, 1)};
  auto bytes_of = [&](int b) { return block_cnt(count, n, b) * es; };
  auto ptr_of = [&](int b) { return B(recv) + block_off(count, n, b) * es; };
  auto rs_dest = [&](int s, int b) { return direct ? ptr_of(b) : tmp[s % 2]; };  // step s receives block b
  auto input_of = [&](int b) { return static_cast<const std::byte*>(send) + block_off(count, n, b) * es; };
  auto chunks_of = [&](size_t bytes) { return chunks_in(bytes, chunk); };
  auto len_of = [&](size_t bytes, size_t k) { return chunk_len(bytes, chunk, k); };
  const int steps = n - 1;

  std::vector<std::vector<Request>> rs_sends(steps), ag_sends(steps), rs_recvs(steps), ag_recvs(steps);
  auto post_rs_recvs = [&](int s) {
    const int b = mod(r - s - 1);
    size_t bytes = bytes_of(b);
    for (size_t k = 0; k < chunks_of(bytes); ++k)
      rs_recvs[s].push_back(c.irecv(left, rs_dest(s, b) + k * chunk, len_of(bytes, k), ring_tag(s, k)));
  };
  auto post_send = [&](std::vector<Request>& into, int step, int block, size_t k) {
    into.push_back(c.isend_exchange(right, ptr_of(block) + k * chunk, len_of(bytes_of(block), k), ring_tag(step, k)));
  };

  auto post_ag_recvs = [&](int s) -> Status {
    for (Request& q : rs_sends[s]) PODNET_RETURN_IF_ERROR(c.wait_send(q, right));
    const int b = mod(r - s);
    for (size_t k = 0; k < chunks_of(bytes_of(b)); ++k)
      ag_recvs[s].push_back(c.irecv(left, ptr_of(b) + k * chunk, len_of(bytes_of(b), k), ring_tag(n + s, k)));
    return {};
  };

  // Reduce-scatter.
  post_rs_recvs(0);
  for (size_t k = 0; k < chunks_of(bytes_of(r)); ++k)
    rs_sends[0].push_back(c.isend_exchange(right, input_of(r) + k * chunk, len_of(bytes_of(r), k), ring_tag(0, k)));
  for (int s = 0; s < steps; ++s) {
    // The other buffer is free: every chunk of step s-1 has been reduced.
    if (s + 1 < steps) post_rs_recvs(s + 1);
    // The left neighbour finishes block r in this same last step and starts the allgather
    // with it chunk by chunk: its receives must be posted now, or those chunks arrive before
    // them and are copied twice (into the unexpected queue, then into place). Step 0's
    // sends, which read block r in place, were done long ago (unless step 0 is the last:
    // two ranks post them after the loop, not to wait for the sends just posted).
    if (s == steps - 1 && steps > 1) PODNET_RETURN_IF_ERROR(post_ag_recvs(0));
    const int rb = mod(r - s - 1);
    const size_t bytes = bytes_of(rb);
    for (size_t k = 0; k < chunks_of(bytes); ++k) {
      const size_t len = len_of(bytes, k);
      PODNET_RETURN_IF_ERROR(c.wait_recv(rs_recvs[s][k], left, len));
      std::byte* p = ptr_of(rb) + k * chunk;
      // Each block passes through this rank once: its own part comes from the input.
      c.reduce3(p, input_of(rb) + k * chunk, rs_dest(s, rb) + k * chunk, len / es);
      if (s + 1 < steps) {
        post_send(rs_sends[s + 1], s + 1, rb, k);
      } else {  // rb == r+1: this chunk is final; the allgather starts with it
        finalize(c, p, len / es);
        post_send(ag_sends[0], n, rb, k);
      }
    }
  }

  // Allgather.
  if (steps == 1) PODNET_RETURN_IF_ERROR(post_ag_recvs(0));
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) PODNET_RETURN_IF_ERROR(post_ag_recvs(s + 1));
    const int b = mod(r - s);
    for (size_t k = 0; k < chunks_of(bytes_of(b)); ++k) {
      PODNET_RETURN_IF_ERROR(c.wait_recv(ag_recvs[s][k], left, len_of(bytes_of(b), k)));
      if (s + 1 < steps) post_send(ag_sends[s + 1], n + s + 1, b, k);
    }
  }
  for (auto& step : ag_sends)
    for (Request& q : step) PODNET_RETURN_IF_ERROR(c.wait_send(q, right));
  return {};
}

// Out of place, the input is not copied to the output first: the first exchange sends from
// the input and its reduction writes the output (so does the fold of a non-power-of-two).
Status allreduce_recursive_doubling(Call& c, const void* send, void* recv, size_t count) {
  const size_t bytes = count * c.esize();
  const int n = c.size(), p2 = pow2_floor(n), rem = n - p2;
  Status st;
  const std::byte* data = nullptr;
  int newrank = fold_in(c, send, recv, count, p2, st, &data);
  PODNET_RETURN_IF_ERROR(st);
  if (newrank >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < p2; mask <<= 1, ++step) {
      int peer = real_rank(newrank ^ mask, rem);
      std::byte* tmp = receive_into(c, data, recv, B(recv), bytes, 0);
      PODNET_RETURN_IF_ERROR(c.sendrecv(peer, data, bytes, peer, tmp, bytes, step));
      // Lower rank's data first, on both sides: identical results everywhere.
      if (peer < c.rank()) c.reduce3(recv, tmp, data, count);
      else c.reduce3(recv, data, tmp, count);
      data = B(recv);
    }
    copy_in(data, recv, bytes);  // one rank alone: its input is the result
  }
  PODNET_RETURN_IF_ERROR(fold_out(c, recv, count, p2, 100));
  finalize(c, recv, count);
  return {};
}

Status allreduce_tree(Call& c, const void* send, void* recv, size_t count) {
  // A binomial tree: reduce to rank 0, then broadcast from it.
  PODNET_RETURN_IF_ERROR(reduce_binomial(c, send, recv, count, 0));
  PODNET_RETURN_IF_ERROR(broadcast_binomial(c, recv, recv, count, 0));
  return {};
}

// podnet's small-message allreduce: every rank sends its whole vector to every other rank
// at once and reduces locally in rank order. One round of messages instead of log2(n)
// dependent rounds; on TCP, where each round costs a system call and a wake-up per side,
// this is what small allreduces are made of. Memory: (n-1) x message in scratch.
Status allreduce_one_shot(Call& c, const void* send, void* recv, size_t count) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * c.esize();
  std::byte* all = c.scratch(bytes * n, 0);  // null for an empty call: copy_in then copies nothing
  copy_in(send, all + r * bytes, bytes);
  // Small worlds keep the requests on the stack (this is the latency path), and only the n
  // that are used are constructed: 32 empty ones built and torn down were ~450 instructions
  // of ~3,600 per 2-rank call (callgrind).
  SmallVector<Request, 16> rr, sr;
  for (int p = 0; p < n; ++p) rr.emplace_back(p != r ? c.irecv(p, all + p * bytes, bytes, 0) : Request());
  for (int p = 0; p < n; ++p) sr.emplace_back(p != r ? c.isend_exchange(p, all + r * bytes, bytes, 0) : Request());
  for (int p = 0; p < n; ++p)
    if (p != r) PODNET_RETURN_IF_ERROR(c.wait_recv(rr[p], p, bytes));
  for (int p = 0; p < n; ++p)
    if (p != r) PODNET_RETURN_IF_ERROR(c.wait_send(sr[p], p));
  if (n == 1) {
    copy_in(all, recv, bytes);
  } else {
    c.reduce3(recv, all, all + bytes, count);
    for (int p = 2; p < n; ++p) c.reduce(recv, all + p * bytes, count);
  }
  finalize(c, recv, count);
  return {};
}

Status allreduce_rabenseifner(Call& c, const void* send, void* recv, size_t count) {
  // Reduce-scatter by recursive halving, then allgather by recursive doubling, on the
  // power-of-two group (the others fold in and out as in recursive doubling).
  // Out of place, nothing is copied in first: the first halving sends from the input and
  // its reduction writes the output; later steps work in the output.
  const size_t es = c.esize(), bytes = count * es;
  const int n = c.size(), p2 = pow2_floor(n), rem = n - p2;
  Status st;
  const std::byte* data = nullptr;
  int newrank = fold_in(c, send, recv, count, p2, st, &data);
  PODNET_RETURN_IF_ERROR(st);
  if (newrank >= 0 && p2 > 1) {
    // Blocks are defined over p2 parts; [lo, hi) is the range of blocks this rank holds.
    int lo = 0, hi = p2;
    uint32_t step = 1;
    for (int mask = p2 / 2; mask >= 1; mask /= 2, ++step) {
      int peer_new = newrank ^ mask, peer = real_rank(peer_new, rem);
      int mid = (lo + hi) / 2;
      bool keep_low = (newrank & mask) == 0;
      int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
      int give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
      size_t ko = block_off(count, p2, keep_lo), kc = block_off(count, p2, keep_hi) - ko;
      size_t go = block_off(count, p2, give_lo), gc = block_off(count, p2, give_hi) - go;
      std::byte* tmp = receive_into(c, data, recv, B(recv) + ko * es, bytes, 0);
      PODNET_RETURN_IF_ERROR(c.sendrecv(peer, data + go * es, gc * es, peer, tmp, kc * es, step));
      if (peer < c.rank()) c.reduce3(B(recv) + ko * es, tmp, data + ko * es, kc);
      else c.reduce3(B(recv) + ko * es, data + ko * es, tmp, kc);
      data = B(recv);
      lo = keep_lo;
      hi = keep_hi;
    }
    finalize(c, B(recv) + block_off(count, p2, lo) * es, block_off(count, p2, hi) - block_off(count, p2, lo));
    for (int mask = 1; mask < p2; mask *= 2, ++step) {
      int peer_new = newrank ^ mask, peer = real_rank(peer_new, rem);
      int size_blocks = hi - lo;
      int plo = (newrank & mask) ? lo - size_blocks : hi, phi = plo + size_blocks;
      size_t so = block_off(count, p2, lo), sc = block_off(count, p2, hi) - so;
      size_t ro = block_off(count, p2, plo), rc = block_off(count, p2, phi) - ro;
      PODNET_RETURN_IF_ERROR(c.sendrecv(peer, B(recv) + so * es, sc * es, peer, B(recv) + ro * es, rc * es, step));
      lo = std::min(lo, plo);
      hi = std::max(hi, phi);
    }
  } else if (newrank >= 0) {
    copy_in(data, recv, bytes);  // one rank alone: its input is the result
    finalize(c, recv, count);
  }
  return fold_out(c, recv, count, p2, 100);
}

}  // namespace podnet::detail::algo
