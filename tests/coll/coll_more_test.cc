// Every collective other than allreduce (coll_test.cc) x algorithm x data type x op (where
// it reduces) x size {0, 1, 7, 4096+3, 1 MiB+5} x root x in-place variant, over world sizes
// {1, 2, 3, 4, 5, 8}, checked against the reference of reference_coll.h. Algorithms are
// forced with set_algorithm and checked with last_algorithm.
//
// Time: the 1 MiB+5 size runs for a few types (and ops) per algorithm, in place for one of
// them; every root at the small sizes, the first and the last root at 1 MiB.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "coll_cases.h"
#include "coll_harness.h"

namespace podnet::testing {
namespace {

// A call that goes wrong fails after 30 s instead of the default two minutes, so one bug
// does not run the binary into ctest's timeout (the environment may still say otherwise).
[[maybe_unused]] const bool kTimeoutSet = [] { return ::setenv("PODNET_COLL_TIMEOUT_MS", "30000", 0) == 0; }();
// The arena tests below expect the arena's own crossovers, whatever this host's probe would
// find (tests/coll/shm_prefer_test.cc covers the probe and PODNET_SHM_PREFER=cma).
[[maybe_unused]] const bool kPreferSet = [] { return ::setenv("PODNET_SHM_PREFER", "arena", 0) == 0; }();

// Every root at the small sizes; the first and the last at 1 MiB.
std::vector<int> roots_for(int n, size_t count) {
  std::vector<int> all;
  if (count <= kBig) {
    for (int r = 0; r < n; ++r) all.push_back(r);
  } else {
    all.push_back(0);
    if (n > 1) all.push_back(n - 1);
  }
  return all;
}

// The whole matrix of one collective on n ranks.
std::vector<Case> matrix(Collective c, int n) {
  std::vector<Case> cases;
  std::vector<std::string> algos = expected_algorithms(c);
  if (algos.empty()) algos.push_back("");
  for (const std::string& algo : algos)
    for (DataType t : kTypes)
      for (ReduceOp op : kOps) {
        if (!reduces(c) && op != ReduceOp::kSum) continue;
        for (size_t count : kSizes)
          for (Variant v : variants(c)) {
            if (!forced_runs(algo, c, count, t, n)) continue;
            if (count > kBig) {
              if (reduces(c) ? !big_ok(t, op) : !big_ok(t)) continue;
              // In place at 1 MiB: for one type per algorithm.
              if (v != Variant::kOutOfPlace && t != (reduces(c) ? DataType::kFloat32 : DataType::kInt8)) continue;
            }
            if (c == Collective::kSendRecv) {
              for (int s = 0; s < std::max(1, n - 1); ++s) cases.push_back({c, algo, t, op, count, s, v});
              continue;
            }
            for (int root : rooted(c) ? roots_for(n, count) : std::vector<int>{0})
              cases.push_back({c, algo, t, op, count, root, v});
          }
      }
  return cases;
}

struct WorldSize : ::testing::TestWithParam<int> {
  void check(Collective c) {
    Pod pod(GetParam());
    auto cases = matrix(c, GetParam());
    RecordProperty("calls", static_cast<int>(cases.size()));
    EXPECT_EQ(run_cases(pod, cases), 0u) << cases.size() << " calls of " << collective_name(c);
  }
};
INSTANTIATE_TEST_SUITE_P(Ranks, WorldSize, ::testing::Values(1, 2, 3, 4, 5, 8));

TEST_P(WorldSize, ReduceEveryRootTypeOpSize) { check(Collective::kReduce); }
TEST_P(WorldSize, BroadcastEveryAlgorithmTypeSize) { check(Collective::kBroadcast); }
TEST_P(WorldSize, AllgatherEveryAlgorithmTypeSize) { check(Collective::kAllgather); }
TEST_P(WorldSize, AllgathervUnequalCounts) { check(Collective::kAllgatherv); }
TEST_P(WorldSize, ReduceScatterEveryAlgorithmTypeOpSize) { check(Collective::kReduceScatter); }
TEST_P(WorldSize, AlltoallEveryAlgorithmTypeSize) { check(Collective::kAlltoall); }
TEST_P(WorldSize, AlltoallvUnequalCounts) { check(Collective::kAlltoallv); }
TEST_P(WorldSize, GatherEveryRootTypeSize) { check(Collective::kGather); }
TEST_P(WorldSize, ScatterEveryRootTypeSize) { check(Collective::kScatter); }
TEST_P(WorldSize, SendRecvEveryPairTypeSize) { check(Collective::kSendRecv); }

// Nobody leaves a barrier before the last rank has arrived: one rank per round arrives late.
TEST_P(WorldSize, BarrierWaitsForTheLastRank) {
  const int n = GetParam();
  Pod pod(n);
  constexpr int kRounds = 12;
  std::atomic<int> arrived{0};
  pod.run([&](int r) {
    ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kBarrier, "dissemination").ok());
    for (int round = 0; round < kRounds; ++round) {
      if (r == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      arrived.fetch_add(1);
      Status st = pod.comm(r).barrier();
      EXPECT_TRUE(st.ok()) << "round " << round << " rank " << r << ": " << st.to_string();
      EXPECT_GE(arrived.load(), n * (round + 1)) << "rank " << r << " left barrier " << round << " early";
      EXPECT_EQ(pod.comm(r).last_algorithm(Collective::kBarrier), "dissemination");
      // Keep the next round's early arrivals from hiding a late leaver of this one.
      Status st2 = pod.comm(r).barrier();
      EXPECT_TRUE(st2.ok()) << st2.to_string();
    }
  });
}

// Literal send == recv at the root of gather and scatter, made deterministic. Gather: the
// root calls late, so rank 0's block is already waiting when the root posts its receives
// (into recv, which is also where the root's own block is). Scatter: rank 0 calls late and
// the blocks are above the transport's eager limit (64 KiB), so the root's send of block 0
// is still pending when the root copies its own block into recv (which is block 0).
TEST(CollInPlace, GatherSendEqualsRecvAtRoot) {
  for (int n : {2, 3}) {
    Pod pod(n);
    std::atomic<size_t> problems{0};
    pod.run([&](int r) {
      if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      problems += run_case(pod.comm(r), {Collective::kGather, "linear", DataType::kInt32, ReduceOp::kSum, 4, n - 1,
                                         Variant::kAlias});
    });
    EXPECT_EQ(problems.load(), 0u) << "gather(send == recv) at root " << n - 1 << " of " << n;
  }
}

TEST(CollInPlace, ScatterRecvEqualsSendAtRoot) {
  for (int n : {2, 3}) {
    Pod pod(n);
    std::atomic<size_t> problems{0};
    pod.run([&](int r) {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      problems += run_case(pod.comm(r), {Collective::kScatter, "linear", DataType::kInt32, ReduceOp::kSum, 20000,
                                         n - 1, Variant::kAlias});
    });
    EXPECT_EQ(problems.load(), 0u) << "scatter(recv == send) at root " << n - 1 << " of " << n;
  }
}

// "shm" forced for a call larger than the arena's slot (allreduce excepted: it goes through in
// parts) runs the tuner's choice, and says so through last_algorithm; the next call that fits
// is back in the arena.
TEST(CollArena, ForcedShmBeyondTheSlotRunsAnotherAlgorithm) {
  // broadcast has no parts: beyond the slot the tuner's choice runs instead.
  const int n = 3;
  Pod pod(n);
  pod.run([&](int r) { ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kBroadcast, "shm").ok()); });
  const size_t big = kArenaSlot / 4 + 1000, small = 100;
  ASSERT_FALSE(arena_fits(Collective::kBroadcast, big, DataType::kInt32, n));
  std::atomic<int> problems{0};
  pod.run([&](int r) {
    for (size_t count : {big, small, big}) {
      std::vector<int32_t> buf(count, -1);
      if (r == 1)
        for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(i % 1000 + 7);
      Status st = pod.comm(r).broadcast(buf.data(), count, DataType::kInt32, 1);
      if (!st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        continue;
      }
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != static_cast<int32_t>(i % 1000 + 7)) {
          ADD_FAILURE() << "rank " << r << " count " << count << " element " << i << " = " << buf[i];
          ++problems;
          break;
        }
      std::string used = pod.comm(r).last_algorithm(Collective::kBroadcast);
      if ((count == small) != (used == "shm")) {
        ADD_FAILURE() << "count " << count << " ran '" << used << "'";
        ++problems;
      }
    }
  });
  EXPECT_EQ(problems.load(), 0);
}

// Rooted calls let ranks run ahead of each other by up to the arena's 64 buffers: tiny
// payloads (the line pages' 32- and 64-byte entries), small ones (a page buffer) and
// payloads past a page (only every fourth buffer holds one; the call numbers skip to it)
// mixed, a root that runs ahead of a sleeping rank by more
// than 64 calls' worth of work, so that it must wait for buffers the slow rank has not
// read yet, and an allreduce now and then. Every element is checked.
TEST(CollArena, RanksRunAheadThroughSmallAndLargeBuffers) {
  const int n = 4;
  Pod pod(n);
  pod.run([&](int r) { ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kBroadcast, "shm").ok()); });
  // int32: 12 B, 4400 B (> a page buffer), 32 B, 80000 B, 8 B, 4 B, 8 B, 400 B
  const size_t sizes[] = {3, 1100, 8, 20000, 2, 1, 2, 100};
  auto value = [](int call, size_t i) { return static_cast<int32_t>(call * 7919 + static_cast<int>(i % 4093)); };
  std::atomic<int> problems{0};
  pod.run([&](int r) {
    Communicator& comm = pod.comm(r);
    for (int call = 0; call < 600 && problems.load() == 0; ++call) {
      const int root = call / 200 % n;
      // The others wait for the root's posts; the root waits for no one until it would
      // reuse a buffer that the rank sleeping here has not read yet.
      if (r == (root + 1) % n && call % 200 == 10) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (call % 200 == 199) {
        // allreduce in the arena: every rank waits for every other, then the run-ahead resumes
        std::vector<int32_t> in(1500, r + 1), out(1500, -1);
        Status st = comm.allreduce(in.data(), out.data(), in.size(), DataType::kInt32, ReduceOp::kSum);
        if (!st.ok() || out.front() != n * (n + 1) / 2 || out.back() != n * (n + 1) / 2) {
          ADD_FAILURE() << "rank " << r << " call " << call << ": allreduce " << st.to_string() << " gave " << out.back();
          ++problems;
        }
        continue;
      }
      const size_t count = sizes[call % std::size(sizes)];
      std::vector<int32_t> buf(count, -1);
      if (r == root)
        for (size_t i = 0; i < count; ++i) buf[i] = value(call, i);
      if (Status st = comm.broadcast(buf.data(), count, DataType::kInt32, root); !st.ok()) {
        ADD_FAILURE() << "rank " << r << " call " << call << ": " << st.to_string();
        ++problems;
        return;
      }
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != value(call, i)) {
          ADD_FAILURE() << "rank " << r << " call " << call << " (" << count << " elements, root " << root << ") element "
                        << i << " = " << buf[i] << ", expected " << value(call, i);
          ++problems;
          return;
        }
      if (comm.last_algorithm(Collective::kBroadcast) != "shm") {
        ADD_FAILURE() << "call " << call << " ran " << comm.last_algorithm(Collective::kBroadcast);
        ++problems;
        return;
      }
    }
  });
  EXPECT_EQ(problems.load(), 0);
}

// Within one slot the own block goes from the input straight to the output (the peers'
// from their slots), wherever the input lies: apart, as the own block, inside another
// rank's block, or overlapping the own block.
TEST(CollArena, AllgatherWithinASlotTakesTheInputFromAnywhere) {
  const int n = 3;
  Pod pod(n);
  pod.run([&](int r) { ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kAllgather, "shm").ok()); });
  const size_t count = 1000;  // int32: 4000 bytes per block, one slot
  auto value = [](int from, size_t i) { return static_cast<int32_t>(from * 100000 + i % 9973); };
  std::atomic<int> problems{0};
  pod.run([&](int r) {
    // Where the input starts inside the output (in elements); SIZE_MAX: a buffer of its own.
    for (size_t at : {SIZE_MAX, r * count, ((r + 1) % n) * count + 5, r * count + 3}) {
      std::vector<int32_t> out(count * n + 8, -1), apart(count);
      int32_t* in = at == SIZE_MAX ? apart.data() : out.data() + at;
      for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
      if (Status st = pod.comm(r).allgather(in, out.data(), count, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      for (int from = 0; from < n; ++from)
        for (size_t i = 0; i < count; ++i)
          if (out[from * count + i] != value(from, i)) {
            ADD_FAILURE() << "input at " << static_cast<int64_t>(at) << ": rank " << r << " block " << from
                          << " element " << i << " = " << out[from * count + i] << ", expected " << value(from, i);
            ++problems;
            return;
          }
      if (pod.comm(r).last_algorithm(Collective::kAllgather) != "shm") {
        ADD_FAILURE() << "ran " << pod.comm(r).last_algorithm(Collective::kAllgather);
        ++problems;
      }
    }
  });
  EXPECT_EQ(problems.load(), 0);
}

TEST(CollArena, AllgatherAndAlltoallBeyondTheSlotGoInParts) {
  // Forced "shm" beyond the slot: slot-sized parts, each an arena call (28 per round, more
  // than the arena's 16 buffers, so the ranks reuse buffers while others may still read
  // them), with a tail shorter than a part; out of place, in place, and an allgather input inside the
  // output elsewhere than its own block. The pattern checks every element's origin.
  const int n = 3;
  Pod pod(n);
  pod.run([&](int r) {
    ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kAllgather, "shm").ok());
    ASSERT_TRUE(pod.comm(r).set_algorithm(Collective::kAlltoall, "shm").ok());
  });
  const size_t count = kArenaSlot / 4 * 5 + 13;  // int32: 5 parts and a bit per allgather block
  ASSERT_GT(count * sizeof(int32_t), kArenaSlot);
  ASSERT_GT((count / n + 1) * n * sizeof(int32_t), kArenaSlot);
  std::atomic<int> problems{0};
  auto value = [](int from, int to, size_t i) { return static_cast<int32_t>(from * 100000 + to * 10000 + i % 9973); };
  auto check = [&](int r, const char* what, const std::vector<int32_t>& out, size_t block, bool a2a, size_t skew) {
    for (int from = 0; from < n; ++from)
      for (size_t i = 0; i < block; ++i) {
        int32_t want = a2a ? value(from, r, i) : value(from, 0, i);
        if (out[skew + from * block + i] != want) {
          ADD_FAILURE() << what << ": rank " << r << " block " << from << " element " << i << " = " << out[skew + from * block + i]
                        << ", expected " << want;
          ++problems;
          return;
        }
      }
    if (pod.comm(r).last_algorithm(a2a ? Collective::kAlltoall : Collective::kAllgather) != "shm") {
      ADD_FAILURE() << what << " ran " << pod.comm(r).last_algorithm(a2a ? Collective::kAlltoall : Collective::kAllgather);
      ++problems;
    }
  };
  pod.run([&](int r) {
    Communicator& comm = pod.comm(r);
    for (int round = 0; round < 2; ++round) {
      // allgather out of place
      std::vector<int32_t> in(count), out(count * n, -1);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, 0, i);
      if (Status st = comm.allgather(in.data(), out.data(), count, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      check(r, "allgather", out, count, false, 0);
      // in place: the input is the own block
      std::fill(out.begin(), out.end(), -1);
      for (size_t i = 0; i < count; ++i) out[r * count + i] = value(r, 0, i);
      if (Status st = comm.allgather(out.data() + r * count, out.data(), count, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      check(r, "allgather in place", out, count, false, 0);
      // the input inside the output, at another rank's block and shifted by 5 elements
      std::vector<int32_t> big(count * n + 5, -1);
      const size_t at = ((r + 1) % n) * count + 5;
      for (size_t i = 0; i < count; ++i) big[at + i] = value(r, 0, i);
      if (Status st = comm.allgather(big.data() + at, big.data(), count, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      check(r, "allgather input inside the output", big, count, false, 0);
      // alltoall, out of place and in place (blocks of count / n + 1 elements)
      const size_t block = count / n + 1;
      std::vector<int32_t> a(block * n), b(block * n, -1);
      for (int to = 0; to < n; ++to)
        for (size_t i = 0; i < block; ++i) a[to * block + i] = value(r, to, i);
      if (Status st = comm.alltoall(a.data(), b.data(), block, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      check(r, "alltoall", b, block, true, 0);
      if (Status st = comm.alltoall(a.data(), a.data(), block, DataType::kInt32); !st.ok()) {
        ADD_FAILURE() << st.to_string();
        ++problems;
        return;
      }
      check(r, "alltoall in place", a, block, true, 0);
    }
  });
  EXPECT_EQ(problems.load(), 0);
}

// One case on rank r of a pod: its result is checked (run_case) and it must have run `algo`.
int run_expecting(Pod& pod, int r, const Case& k, const char* algo) {
  int problems = static_cast<int>(run_case(pod.comm(r), k));
  const std::string used = pod.comm(r).last_algorithm(k.coll);
  if (used != algo) {
    ADD_FAILURE() << describe(k, pod.comm(r).size()) << " ran '" << used << "', not " << algo;
    ++problems;
  }
  return problems;
}

// Without a tuner table, allgather and alltoall leave the arena for direct cross-memory
// reads past its crossover (every rank of the test may read the others: one process);
// allgather blocks from 1 MiB come back to it, in parts. In place, alltoall on more than two
// ranks swaps pair by pair ("cma") where it reads directly out of place.
TEST(CollArena, DirectReadsTakeOverPastTheArena) {
  Pod pod(3);
  std::atomic<int> problems{0};
  const int mib = (1 << 20) / 4;  // int32 elements in 1 MiB
  pod.run([&](int r) {
    // allgather: blocks up to 128 KiB in the arena; alltoall: up to 128 KiB of blocks.
    for (auto [c, count, v, algo] : {std::tuple{Collective::kAllgather, 1000, Variant::kOutOfPlace, "shm"},
                                     std::tuple{Collective::kAllgather, 40000, Variant::kOutOfPlace, "cma"},
                                     std::tuple{Collective::kAllgather, 40000, Variant::kInPlace, "cma"},
                                     std::tuple{Collective::kAllgather, mib, Variant::kOutOfPlace, "shm"},
                                     std::tuple{Collective::kAllgather, mib + 3, Variant::kInPlace, "shm"},
                                     std::tuple{Collective::kAlltoall, 1000, Variant::kOutOfPlace, "shm"},
                                     std::tuple{Collective::kAlltoall, 16000, Variant::kOutOfPlace, "cma"},
                                     std::tuple{Collective::kAlltoall, 16000, Variant::kInPlace, "cma"},
                                     std::tuple{Collective::kAlltoall, mib, Variant::kOutOfPlace, "cma"},
                                     std::tuple{Collective::kAlltoall, mib + 3, Variant::kInPlace, "cma"}})
      problems += run_expecting(pod, r, Case{c, "", DataType::kInt32, ReduceOp::kSum, static_cast<size_t>(count), 0, v},
                                algo);
  });
  EXPECT_EQ(problems.load(), 0);
}

// allreduce stays in the arena at every size (in slot-sized parts past a slot), on two
// ranks as on more.
TEST(CollArena, AllreduceStaysInTheArenaAtEverySize) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Pod pod(n);
    std::atomic<int> problems{0};
    pod.run([&](int r) {
      const size_t mib = (1u << 20) / 4 + 5;  // float32 elements: just over 1 MiB
      for (auto [count, v] : {std::tuple{size_t{1000}, Variant::kOutOfPlace}, std::tuple{mib, Variant::kOutOfPlace},
                              std::tuple{mib, Variant::kInPlace}})
        problems += run_expecting(pod, r, Case{Collective::kAllreduce, "", DataType::kFloat32, ReduceOp::kSum, count, 0, v},
                                  "shm");
    });
    EXPECT_EQ(problems.load(), 0);
  }
}

TEST(CollArena, AllreduceLargerThanASlotGoesThroughInParts) {
  // 2.5 slots and a few elements: three parts, the last one short and not a multiple of n;
  // each part is reduced block by block (one block per rank), out of place and in place.
  for (int n : {3, 4}) {
    Pod pod(n);
    const size_t count = kArenaSlot / 4 * 5 / 2 + 7;
    std::atomic<int> problems{0};
    pod.run([&](int r) {
      for (bool in_place : {false, true}) {
        std::vector<int32_t> in(count), out(count);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>((r + 1) * (i % 997));
        int32_t* dst = in_place ? in.data() : out.data();
        Status st = pod.comm(r).allreduce(in.data(), dst, count, DataType::kInt32, ReduceOp::kSum);
        if (!st.ok()) {
          ADD_FAILURE() << st.to_string();
          ++problems;
          continue;
        }
        const int32_t ranks_sum = n * (n + 1) / 2;
        for (size_t i = 0; i < count; ++i)
          if (dst[i] != ranks_sum * static_cast<int32_t>(i % 997)) {
            ADD_FAILURE() << n << " ranks, rank " << r << (in_place ? " in place" : "") << " element " << i
                          << " = " << dst[i];
            ++problems;
            break;
          }
        if (pod.comm(r).last_algorithm(Collective::kAllreduce) != std::string("shm")) {
          ADD_FAILURE() << "ran '" << pod.comm(r).last_algorithm(Collective::kAllreduce) << "'";
          ++problems;
        }
      }
    });
    EXPECT_EQ(problems.load(), 0) << n << " ranks";
  }
}

// set_algorithm's error lists the algorithms; each one it accepts is what last_algorithm
// then reports.
TEST(CollAlgorithmNames, ListedForcedAndReported) {
  const int n = 3;
  Pod pod(n);
  const Collective all[] = {Collective::kAllreduce,  Collective::kReduce,        Collective::kBroadcast,
                            Collective::kAllgather,  Collective::kAllgatherv,    Collective::kReduceScatter,
                            Collective::kAlltoall,   Collective::kAlltoallv,     Collective::kGather,
                            Collective::kScatter,    Collective::kBarrier,       Collective::kSendRecv};
  for (Collective c : all) {
    Status bad = pod.comm(0).set_algorithm(c, "no_such_algorithm");
    ASSERT_EQ(bad.code(), Code::kInvalidArgument) << collective_name(c);
    const std::string& m = bad.message();
    auto open = m.find("(available: ");
    ASSERT_NE(open, std::string::npos) << m;
    std::vector<std::string> listed;
    std::string rest = m.substr(open + 12, m.find(')', open) - open - 12);
    for (size_t p = 0; p <= rest.size();) {
      size_t q = std::min(rest.find(", ", p), rest.size());
      listed.push_back(rest.substr(p, q - p));
      p = q + 2;
    }
    auto want = expected_algorithms(c);
    if (!want.empty()) {
      EXPECT_EQ(listed, want) << collective_name(c);
    }
    for (const std::string& algo : listed) {
      Case k{c, algo, DataType::kInt32, ReduceOp::kSum, 5, 1, Variant::kOutOfPlace};
      // run_case checks last_algorithm against the forced name.
      EXPECT_EQ(run_cases(pod, {k}), 0u) << collective_name(c) << " forced to '" << algo << "'";
    }
  }
  // Empty: back to the tuner.
  Case k{Collective::kAllgather, "", DataType::kInt32, ReduceOp::kSum, 5, 0, Variant::kOutOfPlace};
  EXPECT_EQ(run_cases(pod, {k}), 0u);
}

}  // namespace
}  // namespace podnet::testing
