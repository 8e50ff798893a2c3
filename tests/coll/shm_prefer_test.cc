// PODNET_SHM_PREFER and the arena's set-up probe (src/coll/arena_probe.cc): every rank of a
// communicator uses the same crossovers, whatever the probe measured; the forced settings
// give the tables tuner.cc names; the probe leaves the threads' CPU affinity as it was.
// Registered three times (tests/coll/CMakeLists.txt): the default (probe), arena and cma.
#include <sched.h>

#include <atomic>
#include <string>
#include <vector>

#include "base/config.h"
#include "coll_cases.h"
#include "coll_harness.h"
#include "transport/shm/endpoint.h"

namespace podnet::testing {
namespace {

[[maybe_unused]] const bool kTimeoutSet = [] { return ::setenv("PODNET_COLL_TIMEOUT_MS", "30000", 0) == 0; }();

// Runs `cases` on every rank of `pod` (results checked by run_case) and returns, per rank,
// the algorithm each one ran.
std::vector<std::vector<std::string>> run_and_name(Pod& pod, const std::vector<Case>& cases, std::atomic<int>& problems) {
  std::vector<std::vector<std::string>> used(pod.size());
  pod.run([&](int r) {
    for (const Case& k : cases) {
      problems += static_cast<int>(run_case(pod.comm(r), k));
      used[r].push_back(pod.comm(r).last_algorithm(k.coll));
    }
  });
  return used;
}

// Every rank ran the same algorithms, and they are `arena` where hand-overs through the
// segment were chosen and `cma` where cross-memory copies were; with the probe either set,
// but one of them for every case.
void expect_one_table(const std::vector<std::vector<std::string>>& used, const std::vector<std::string>& arena,
                      const std::vector<std::string>& cma) {
  for (size_t r = 1; r < used.size(); ++r) EXPECT_EQ(used[r], used[0]) << "rank " << r << " chose otherwise than rank 0";
  const std::string& prefer = config().shm_prefer;
  if (prefer == "arena") EXPECT_EQ(used[0], arena);
  else if (prefer == "cma") EXPECT_EQ(used[0], cma);
  else EXPECT_TRUE(used[0] == arena || used[0] == cma) << "neither table: " << ::testing::PrintToString(used[0]);
}

TEST(ShmPrefer, TwoRanksUseOneTableOnEveryRank) {
  Pod pod(2);
  std::atomic<int> problems{0};
  // 16 KiB allgather blocks, 64 KiB of alltoall blocks, a 256 KiB allreduce: past the cma
  // crossovers, inside the arena's.
  const std::vector<Case> cases{
      Case{Collective::kAllgather, "", DataType::kInt32, ReduceOp::kSum, 4096, 0, Variant::kOutOfPlace},
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 8192, 0, Variant::kOutOfPlace},
      Case{Collective::kAllreduce, "", DataType::kFloat32, ReduceOp::kSum, 65536, 0, Variant::kOutOfPlace},
      Case{Collective::kAllreduce, "", DataType::kFloat32, ReduceOp::kSum, 65536, 0, Variant::kInPlace},
      // In place the alltoall swaps pair by pair where cross-memory copies are cheaper.
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 8192, 0, Variant::kInPlace},
      // 1 MiB blocks: past the arena's crossover, where in place two ranks still take the
      // arena's parts unless cross-memory copies are cheaper.
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 262144, 0, Variant::kOutOfPlace},
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 262144, 0, Variant::kInPlace}};
  auto used = run_and_name(pod, cases, problems);
  EXPECT_EQ(problems.load(), 0);
  expect_one_table(used, {"shm", "shm", "shm", "shm", "shm", "cma", "shm"},
                   {"cma", "cma", "cma", "cma", "cma", "cma", "cma"});
}

TEST(ShmPrefer, MoreRanksKeepAllreduceInTheArena) {
  Pod pod(3);
  std::atomic<int> problems{0};
  // 3 x 32 KiB of alltoall blocks (past 64 KiB); allreduce of 1 MiB: the arena either way.
  // In place the alltoall swaps pair by pair wherever it runs "cma" out of place: the 32 KiB
  // blocks where cross-memory copies are cheaper, 256 KiB blocks (past 128 KiB) either way.
  const std::vector<Case> cases{
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 8192, 0, Variant::kOutOfPlace},
      Case{Collective::kAllreduce, "", DataType::kFloat32, ReduceOp::kSum, 262144, 0, Variant::kOutOfPlace},
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 8192, 0, Variant::kInPlace},
      Case{Collective::kAlltoall, "", DataType::kInt32, ReduceOp::kSum, 65536, 0, Variant::kInPlace}};
  auto used = run_and_name(pod, cases, problems);
  EXPECT_EQ(problems.load(), 0);
  expect_one_table(used, {"shm", "shm", "shm", "cma"}, {"cma", "shm", "cma", "cma"});
}

// On two ranks with a CPU each, a broadcast past 64 KiB leaves the arena for the binomial
// tree (one transport send, which both sides copy at once: PODNET_SHM_SPLIT_MIN); with more
// ranks than CPUs, or more ranks, it stays in the arena up to 512 KiB. Whatever the probe
// found: the crossover does not depend on it.
TEST(ShmPrefer, TwoRankBroadcastsPast64KiBTakeTheSplitSend) {
  for (int n : {2, 3}) {
    Pod pod(n);
    std::atomic<int> problems{0};
    std::vector<Case> cases;
    for (Variant v : {Variant::kOutOfPlace, Variant::kInPlace})
      for (size_t count : {16384, 32768, 131072})  // 64, 128 and 512 KiB of float
        cases.push_back(Case{Collective::kBroadcast, "", DataType::kFloat32, ReduceOp::kSum, count, n - 1, v});
    auto used = run_and_name(pod, cases, problems);
    EXPECT_EQ(problems.load(), 0);
    const bool split = n == 2 && !pod.world(0).oversubscribed() && config().shm_cma;
    const std::string past = split ? "binomial" : "shm";
    for (size_t r = 1; r < used.size(); ++r) EXPECT_EQ(used[r], used[0]) << "rank " << r;
    EXPECT_EQ(used[0], (std::vector<std::string>{"shm", past, past, "shm", past, past})) << n << " ranks";
  }
}

// An out-of-place broadcast's root copies its input into its output while its sends move, so
// its children copy their messages whole: no split copy hands the root half of each. In
// place the root has nothing else to copy and the 1 MiB sends split (from 1 MiB even on a
// crowded host). Both checked element by element (run_case).
TEST(ShmPrefer, OutOfPlaceBroadcastRootLeavesTheCopyToItsChildren) {
  if (!config().shm_cma) GTEST_SKIP() << "cross-memory attach is off (PODNET_SHM_CMA=0): nothing splits";
  Pod pod(2);
  std::atomic<int> problems{0};
  uint64_t pushes[2] = {0, 0};
  for (Variant v : {Variant::kOutOfPlace, Variant::kInPlace}) {
    const uint64_t before = shm::ShmEndpoint::split_pushes();
    const Case k{Collective::kBroadcast, "binomial", DataType::kFloat32, ReduceOp::kSum, 262144, 0, v};
    for (int i = 0; i < 3; ++i) problems += static_cast<int>(run_cases(pod, {k}));
    pushes[v == Variant::kInPlace] = shm::ShmEndpoint::split_pushes() - before;
  }
  EXPECT_EQ(problems.load(), 0);
  EXPECT_EQ(pushes[0], 0u) << "out of place: the root pushed halves of its sends";
  EXPECT_EQ(pushes[1], 3u) << "in place: one split per call";
}

bool same_affinity(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }

// The probe binds ranks 0 and 1 to two CPUs while it runs: a communicator made later (split
// sets up an arena of its own) must leave every thread's affinity as it found it.
TEST(ShmPrefer, ProbeLeavesTheAffinityAsItWas) {
  Pod pod(2);
  std::atomic<int> problems{0};
  pod.run([&](int r) {
    cpu_set_t before, after;
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    auto sub = pod.comm(r).split(0, 1 - r);  // rank 1 becomes rank 0 of the new one
    ASSERT_TRUE(sub.ok()) << sub.status().to_string();
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    if (!same_affinity(before, after)) {
      ADD_FAILURE() << "rank " << r << ": affinity changed by setting up a communicator";
      ++problems;
    }
    problems += static_cast<int>(
        run_case(**sub, Case{Collective::kAllgather, "", DataType::kInt32, ReduceOp::kSum, 4096, 0, Variant::kOutOfPlace}));
  });
  EXPECT_EQ(problems.load(), 0);
}

}  // namespace
}  // namespace podnet::testing
