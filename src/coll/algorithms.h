// The collective algorithms. Each is correct for any number of ranks (not only powers of
// two) and is written with the point-to-point primitives of Call. Buffers are in elements
// of the call's data type; `send == recv` means in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

#include "coll/call.h"

namespace podnet::detail {
class Arena;
}

namespace podnet::detail::algo {

// allreduce
Status allreduce_ring(Call& c, const void* send, void* recv, size_t count);
Status allreduce_recursive_doubling(Call& c, const void* send, void* recv, size_t count);
Status allreduce_tree(Call& c, const void* send, void* recv, size_t count);
Status allreduce_one_shot(Call& c, const void* send, void* recv, size_t count);
Status allreduce_rabenseifner(Call& c, const void* send, void* recv, size_t count);
// rooted
Status reduce_binomial(Call& c, const void* send, void* recv, size_t count, int root);
// Broadcasts: `send` is read at the root only (== buf in place); the root's copy into its own
// `buf` runs after its sends are posted, while they are in flight.
Status broadcast_binomial(Call& c, const void* send, void* buf, size_t count, int root);
Status broadcast_chain(Call& c, const void* send, void* buf, size_t count, int root);
Status gather_linear(Call& c, const void* send, void* recv, size_t count, int root);
Status scatter_linear(Call& c, const void* send, void* recv, size_t count, int root);
// allgather
// `pipelined` (slow links): blocks larger than a ring_chunk() go in chunks, each passed on
// as soon as it arrived; else each step moves whole blocks.
Status allgather_ring(Call& c, const void* send, void* recv, size_t count, bool pipelined);
Status allgather_bruck(Call& c, const void* send, void* recv, size_t count);
Status allgather_recursive_doubling(Call& c, const void* send, void* recv, size_t count);
Status allgather_linear(Call& c, const void* send, void* recv, size_t count);
Status allgatherv_ring(Call& c, const void* send, void* recv, const std::vector<size_t>& counts);
// reduce_scatter; `pipelined`: each block in ring_chunk() pieces (slow links), else whole
Status reduce_scatter_ring(Call& c, const void* send, void* recv, size_t count, bool pipelined);
Status reduce_scatter_recursive_halving(Call& c, const void* send, void* recv, size_t count);
// alltoall
Status alltoall_pairwise(Call& c, const void* send, void* recv, size_t count);
Status alltoall_bruck(Call& c, const void* send, void* recv, size_t count);
Status alltoall_linear(Call& c, const void* send, void* recv, size_t count);
Status alltoallv_pairwise(Call& c, const void* send, const std::vector<size_t>& scounts, void* recv,
                          const std::vector<size_t>& rcounts);
// barrier
Status barrier_dissemination(Call& c);

// Through the shared collective arena (all ranks on one host; coll/arena.h).
// arena_bytes: the slot bytes a call needs, given the per-rank bytes choose_algorithm sees.
size_t arena_bytes(Collective coll, size_t bytes, int n);
Status shm_allreduce(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status shm_reduce(Call& c, Arena& a, const void* send, void* recv, size_t count, int root);
Status shm_broadcast(Call& c, Arena& a, const void* send, void* buf, size_t count, int root);
Status shm_allgather(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status shm_gather(Call& c, Arena& a, const void* send, void* recv, size_t count, int root);
Status shm_reduce_scatter(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status shm_alltoall(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status shm_scatter(Call& c, Arena& a, const void* send, void* recv, size_t count, int root);
Status shm_barrier(Call& c, Arena& a);
// Direct reads of the peers' buffers by cross-memory attach, coordinated through the arena
// (Arena::cma(): every pair of ranks allowed).
Status cma_allgather(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status cma_alltoall(Call& c, Arena& a, const void* send, void* recv, size_t count);
Status cma_allreduce(Call& c, Arena& a, const void* send, void* recv, size_t count);

// Block i of `count` elements split into n nearly equal blocks (the first count % n have one
// more element).
inline size_t block_off(size_t count, int n, int i) {
  return count / n * i + std::min<size_t>(i, count % n);
}
inline size_t block_cnt(size_t count, int n, int i) {
  return count / n + (static_cast<size_t>(i) < count % n ? 1 : 0);
}

// Whether [p, p + bytes) overlaps [buf, buf + total) (an input inside the output).
inline bool overlaps(const void* p, size_t bytes, const void* buf, size_t total) {
  const auto* a = static_cast<const std::byte*>(p);
  const auto* b = static_cast<const std::byte*>(buf);
  return !(a + bytes <= b || a >= b + total);
}
// Copies every block of n blocks of `bytes` but block `skip` from src to dst.
inline void copy_other_blocks(std::byte* dst, const std::byte* src, size_t bytes, int n, int skip) {
  if (bytes == 0) return;
  if (skip > 0) std::memcpy(dst, src, skip * bytes);
  if (skip + 1 < n) std::memcpy(dst + (skip + 1) * bytes, src + (skip + 1) * bytes, (n - skip - 1) * bytes);
}

// Chunking of pipelined algorithms: bytes per message.
inline constexpr size_t kPipelineChunk = 256 * 1024;
inline constexpr size_t kMinPipelineChunk = 64 * 1024;  // ring allreduce: chunks of small blocks

// The chunk of a ring whose largest block is `max_block` bytes of `es`-byte elements: at
// least ~8 chunks per block, so that several are in flight on every link (a chunk's latency,
// not its size, limits a pipeline that is only 2 deep), but not below kMinPipelineChunk; at
// most kPipelineChunk unless a block needs more than 256 chunks (the step tag keeps 8 bits
// for the chunk); whole elements.
inline size_t ring_chunk(size_t max_block, size_t es) {
  size_t chunk = std::clamp<size_t>((max_block + 7) / 8, kMinPipelineChunk, kPipelineChunk);
  chunk = std::max<size_t>(chunk, (max_block + 255) / 256);
  return (chunk + es - 1) / es * es;
}
// How many chunks of `chunk` bytes carry `bytes` (one, empty, for nothing), and the length
// of chunk k.
inline size_t chunks_in(size_t bytes, size_t chunk) { return bytes == 0 ? 1 : (bytes + chunk - 1) / chunk; }
inline size_t chunk_len(size_t bytes, size_t chunk, size_t k) { return std::min(chunk, bytes - std::min(bytes, k * chunk)); }
// The tag of chunk k (< 256, see ring_chunk) of a pipelined ring's step.
inline uint32_t ring_tag(int step, size_t k) { return static_cast<uint32_t>(step << 8 | static_cast<int>(k)); }

}  // namespace podnet::detail::algo
