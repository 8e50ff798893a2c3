// One collective call, described as data (Case), run on one rank and checked against the
// reference of reference_coll.h. Every rank of a pod runs the same list of cases in the same
// order; a rank never skips a call after a failure, so one wrong result does not make the
// others hang.
//
// Variants: kOutOfPlace; kInPlace: send == recv where the API has both (for gather and
// allgather(v) send points at the caller's own block of recv, for scatter recv points at the
// root's block of send, as in MPI); kAlias (gather, scatter, allgather(v)): literally
// send == recv, which the header allows ("`send` may equal `recv` where both exist"); for
// reduce_scatter, whose kInPlace is literally send == recv, kAlias is recv at the caller's
// own block of send (NCCL's in-place form).
#pragma once

#include <podnet/coll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "reference_coll.h"

namespace podnet::testing {

enum class Variant { kOutOfPlace, kInPlace, kAlias };

struct Case {
  Collective coll = Collective::kAllreduce;
  std::string algo;  // empty: the tuner picks
  DataType t = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;  // elements per rank (per block for allgather, alltoall, reduce_scatter, ...)
  int root = 0;      // root; for kSendRecv, the shift minus one (rank r sends to r+root+1)
  Variant variant = Variant::kOutOfPlace;
};

inline bool reduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}
inline bool rooted(Collective c) {
  return c == Collective::kReduce || c == Collective::kBroadcast || c == Collective::kGather ||
         c == Collective::kScatter;
}
// The variants a collective has.
inline std::vector<Variant> variants(Collective c) {
  switch (c) {
    case Collective::kReduceScatter:
      return {Variant::kOutOfPlace, Variant::kInPlace, Variant::kAlias};
    case Collective::kAllreduce: case Collective::kReduce:
    case Collective::kAlltoall: case Collective::kAlltoallv: case Collective::kBroadcast:
      return {Variant::kOutOfPlace, Variant::kInPlace};
    case Collective::kAllgather: case Collective::kAllgatherv: case Collective::kGather: case Collective::kScatter:
      return {Variant::kOutOfPlace, Variant::kInPlace, Variant::kAlias};
    default:
      return {Variant::kOutOfPlace};
  }
}
// The algorithms this test expects for a collective (what tuner.cc and the task name).
inline std::vector<std::string> expected_algorithms(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return {"ring", "recursive_doubling", "rabenseifner", "tree", "one_shot", "shm", "cma"};
    case Collective::kBroadcast: return {"binomial", "chain", "shm"};
    case Collective::kAllgather: return {"ring", "recursive_doubling", "bruck", "linear", "shm", "cma"};
    case Collective::kReduceScatter: return {"ring", "recursive_halving", "shm"};
    case Collective::kAlltoall: return {"pairwise", "bruck", "linear", "shm", "cma"};
    case Collective::kReduce: return {"binomial", "shm"};
    case Collective::kBarrier: return {"dissemination", "shm"};
    case Collective::kGather: case Collective::kScatter: return {"linear", "shm"};
    default: return {};  // allgatherv, alltoallv, send/recv: not forced in the matrix
  }
}

// Whether a call fits the shared-memory arena's slot at its default size (PODNET_SHM_COLL_MAX
// 512K): forced "shm" beyond it runs the tuner's choice instead (a test of its own).
inline constexpr size_t kArenaSlot = 512 * 1024;
inline bool arena_fits(Collective c, size_t count, DataType t, int n) {
  if (n < 2) return false;  // a single rank has no arena
  // Larger vectors go through in slot-sized parts.
  if (c == Collective::kAllreduce || c == Collective::kAllgather || c == Collective::kAlltoall) return true;
  size_t b = count * dtype_size(t);
  if (c == Collective::kAlltoall || c == Collective::kReduceScatter || c == Collective::kScatter) b *= n;
  return b <= kArenaSlot;
}

// Whether a forced algorithm runs as forced: the arena's "shm" needs the call to fit a slot,
// its "cma" a communicator of more than one rank (every rank of a test is on this host).
inline bool forced_runs(const std::string& algo, Collective c, size_t count, DataType t, int n) {
  if (algo == "shm") return arena_fits(c, count, t, n);
  if (algo == "cma") return n >= 2;
  return true;
}

inline std::string describe(const Case& k, int n) {
  std::string s = std::string(collective_name(k.coll)) + "(" + (k.algo.empty() ? "auto" : k.algo) + ")";
  if (k.coll != Collective::kBarrier) s += " type " + std::string(dtype_name(k.t)) + " count " + std::to_string(k.count);
  if (reduces(k.coll)) s += " op " + std::string(reduce_op_name(k.op));
  if (rooted(k.coll)) s += " root " + std::to_string(k.root);
  if (k.coll == Collective::kSendRecv) s += " shift " + std::to_string(k.root + 1);
  if (k.variant == Variant::kInPlace) s += " in-place";
  if (k.variant == Variant::kAlias) s += " send==recv";
  return s + " n " + std::to_string(n);
}

// Counts of the v-collectives: unequal, with zeros. allgatherv: rank b contributes
// vcount(count, b); alltoallv: rank a sends v2count(count, a, b) elements to rank b.
inline size_t vcount(size_t count, int b) { return b % 3 == 1 ? 0 : count + (b * 5) % 7; }
inline size_t v2count(size_t count, int a, int b) { return (a + 2 * b) % 3 == 2 ? 0 : count + (a * 3 + b) % 5; }
// Pattern keys (below 97): block b of a gather; block from a to b of an alltoall; block b
// of a scatter from root; a broadcast from root.
inline uint64_t key_gather(int b) { return static_cast<uint64_t>(b) + 1; }
inline uint64_t key_pair(int a, int b) { return static_cast<uint64_t>(a) * 8 + b + 1; }
inline uint64_t key_bcast(int root) { return 70 + static_cast<uint64_t>(root); }

constexpr std::byte kJunk{0xA5};

// A buffer of `bytes` bytes and one spare byte past them, all kJunk.
inline std::vector<std::byte> junk(size_t bytes) { return std::vector<std::byte>(bytes + 1, kJunk); }

// What a call must leave alone. Every buffer has one spare byte past its end (junk()): a
// write one past a result goes unseen outside ASan unless someone looks at it.
inline size_t spare_intact(const std::vector<std::byte>& v, const std::string& what, const char* name, int r) {
  if (v.back() == kJunk) return 0;
  ADD_FAILURE() << what << " rank " << r << ": the byte past the end of the " << name << " buffer was written";
  return 1;
}

// A buffer the call must not touch (a non-root's receive buffer of reduce and gather, a send
// buffer the call ignores) still holds nothing but kJunk; the first other byte is named.
// (Buffers the call only reads are compared with what was filled in: a copy taken before the
// call made the matrices slower.)
inline size_t still_junk(const std::vector<std::byte>& v, const std::string& what, const char* name, int r) {
  static const std::vector<std::byte> block(4096, kJunk);
  for (size_t at = 0; at < v.size(); at += block.size()) {
    const size_t len = std::min(block.size(), v.size() - at);
    if (std::memcmp(v.data() + at, block.data(), len) == 0) continue;
    size_t i = at;
    while (v[i] == kJunk) ++i;
    ADD_FAILURE() << what << " rank " << r << ": the call wrote into its " << name << " buffer, which it must not "
                  << "touch (byte " << i << " of " << v.size() << ")";
    return 1;
  }
  return 0;
}

// Runs `k` on this rank and checks what this rank can check. Returns the number of problems
// (each already reported through gtest).
size_t run_case(Communicator& c, const Case& k);

// Runs every case in order on every rank of the pod (one thread per rank).
template <typename PodT>
size_t run_cases(PodT& pod, const std::vector<Case>& cases) {
  std::atomic<size_t> problems{0};
  pod.run([&](int r) {
    for (const Case& k : cases) problems += run_case(pod.comm(r), k);
  });
  return problems.load();
}

}  // namespace podnet::testing
