// The built-in algorithm table: the loopback choices, and the ones for slow links
// (World::slow_links()), which every rank must make alike.
#include <gtest/gtest.h>

#include "coll/tuner.h"

namespace podnet::detail {
namespace {

constexpr size_t K = 1024;

TEST(Tuner, SlowLinksRunTheRingForAllreduceAbove16K) {
  // Loopback: rabenseifner between 64 KiB and 1 MiB on more than two ranks.
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 256 * K, 8), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 256 * K, 8, /*slow_links=*/true), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 64 * K, 4, true), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K, 4, true), "recursive_doubling");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 1 * K, 8, true), "recursive_doubling");
  // Two ranks: the loopback one-shot up to 64 KiB (it sends twice the ring's bytes).
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 64 * K, 2), "one_shot");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 64 * K, 2, true), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 128 * K, 2), "ring");
}

TEST(Tuner, SlowLinksExchangeLargeAlltoallBlocksOnePeerPerStep) {
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 512 * K, 8), "linear");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 512 * K, 8, /*slow_links=*/true), "pairwise");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 8 * K * K, 4, true), "pairwise");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 256 * K, 8, true), "linear");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 1 * K, 8, true, true), "bruck");
}

TEST(Tuner, SlowLinksPipelineBroadcastsAbove4K) {
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 64 * K, 8), "binomial");
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 64 * K, 8, true), "chain");
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 4 * K, 8, true), "binomial");
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 64 * K, 2, true), "binomial");
}

TEST(Tuner, OversubscribedHostsPreferFewerDependentSteps) {
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 16 * K * K, 4), "chain");
  for (size_t bytes : {size_t{8}, 256 * K, 16 * K * K})
    EXPECT_EQ(choose_algorithm(Collective::kBroadcast, bytes, 4, false, /*oversubscribed=*/true), "binomial") << bytes;
  // Slow links decide first (the lab's hosts share one machine's CPUs too).
  EXPECT_EQ(choose_algorithm(Collective::kBroadcast, 16 * K * K, 8, true, true), "chain");
  // Allreduce above 1 MiB on a power-of-two count: rabenseifner instead of the ring.
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 4), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 4, false, true), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 8, false, true), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 3, false, true), "ring") << "3 ranks: the ring won";
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 2, false, true), "rabenseifner");
  // Two ranks: rabenseifner (each half in one message) instead of the ring from 512 KiB over
  // tcp, from 16 MiB over shared memory.
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 256 * K, 2), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 512 * K - 4, 2), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 512 * K, 2), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, K * K, 2), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 4 * K * K, 2), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 4 * K * K, 2, false, false, /*over_shm=*/true), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 2, false, false, true), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 2), "rabenseifner");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 64 * K * K, 2, true), "ring") << "slow links keep the ring";
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 16 * K * K, 8, true, true), "ring") << "slow links decide first";
  // Small allreduce: recursive doubling's log2(n) messages per rank instead of one shot's n-1.
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 8, 4), "one_shot");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 8, 4, false, true), "recursive_doubling");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 4 * K, 8, false, true), "recursive_doubling");
  EXPECT_EQ(choose_algorithm(Collective::kAllreduce, 8, 2, false, true), "one_shot") << "two ranks: one message either way";
  for (size_t bytes : {64 * K, K * K})
    EXPECT_EQ(choose_algorithm(Collective::kAllreduce, bytes, 4, false, true), choose_algorithm(Collective::kAllreduce, bytes, 4));
  // Alltoall keeps bruck up to 2 KiB blocks instead of 1 KiB.
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 2 * K, 4), "linear");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 2 * K, 4, false, true), "bruck");
  EXPECT_EQ(choose_algorithm(Collective::kAlltoall, 4 * K, 8, false, true), "linear");
  // The other collectives keep their choices.
  for (Collective c : {Collective::kAllgather, Collective::kAlltoall})
    for (size_t bytes : {size_t{8}, 256 * K, 16 * K * K})
      EXPECT_EQ(choose_algorithm(c, bytes, 4, false, true), choose_algorithm(c, bytes, 4)) << collective_name(c);
}

TEST(Tuner, TwoRanksGatherWithTheRingAtEverySize) {
  // bruck's local rotation buys nothing when there is one peer.
  EXPECT_EQ(choose_algorithm(Collective::kAllgather, 8, 2), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllgather, 8, 4), "recursive_doubling");
  EXPECT_EQ(choose_algorithm(Collective::kAllgather, 8, 3), "bruck");
  EXPECT_EQ(choose_algorithm(Collective::kAllgather, 64 * K, 2), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kAllgather, 16 * K * K, 2), "ring");
}

TEST(Tuner, MoreRanksGatherPastBruckInOneRoundExceptOnSlowLinks) {
  for (int n : {3, 4, 8}) {
    // log2(n) rounds up to 16 KiB blocks: without bruck's rotation where n is a power of two.
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 16 * K, n), n == 3 ? "bruck" : "recursive_doubling");
    // Over tcp (reno on loopback) a power of two keeps recursive doubling: 4 ranks at every
    // size, 8 from 1 MiB in all; over shm (no cross-memory attach) and on 3 ranks, linear.
    const char* past_16k = n == 4 ? "recursive_doubling" : "linear";
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 16 * K + 4, n), past_16k);
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 64 * K * K, n), n == 3 ? "linear" : "recursive_doubling");
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 128 * K, n), n == 3 ? "linear" : "recursive_doubling");
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 128 * K - 4, n), past_16k);
    for (size_t bytes : {16 * K + 4, 64 * K * K})
      EXPECT_EQ(choose_algorithm(Collective::kAllgather, bytes, n, false, false, /*over_shm=*/true), "linear");
    // Shaped links: n-1 flows at once into each link lose to the ring's one.
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 16 * K, n, true), "bruck");
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 64 * K, n, true), "ring");
    EXPECT_EQ(choose_algorithm(Collective::kAllgather, 64 * K * K, n, true), "ring");
  }
}

TEST(Tuner, ReduceScatterHalvesSmallVectorsOnPowersOfTwo) {
  // bytes: one rank's block; the rule is on the whole vector (n blocks).
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 16 * K, 4), "recursive_halving");
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 16 * K + 4, 4), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 8 * K, 8), "recursive_halving");
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 16 * K, 8), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 4, 4), "recursive_halving");
  // Not on 2 ranks (one exchange either way) nor where n is not a power of two.
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 4, 2), "ring");
  EXPECT_EQ(choose_algorithm(Collective::kReduceScatter, 4, 6), "ring");
}

TEST(Tuner, OtherCollectivesKeepTheLoopbackChoicesOnSlowLinks) {
  for (Collective c : {Collective::kReduceScatter, Collective::kAlltoall})
    for (size_t bytes : {size_t{8}, 4 * K, 256 * K, 16 * K * K})
      for (int n : {2, 4, 8}) {
        if (c == Collective::kAlltoall && bytes >= 512 * K) continue;  // pairwise (above)
        EXPECT_EQ(choose_algorithm(c, bytes, n, true), choose_algorithm(c, bytes, n))
            << collective_name(c) << " " << bytes << " B on " << n;
      }
}

TEST(Tuner, EveryChoiceIsAnAlgorithmOfItsCollective) {
  for (int i = 1; i <= static_cast<int>(Collective::kSendRecv); ++i) {
    auto c = static_cast<Collective>(i);
    for (bool slow : {false, true})
      for (bool crowded : {false, true})
        for (size_t bytes : {size_t{0}, size_t{8}, 64 * K, 16 * K * K})
          for (int n : {1, 2, 3, 8, 64})
            EXPECT_TRUE(validate_algorithm(c, choose_algorithm(c, bytes, n, slow, crowded)).ok()) << collective_name(c);
  }
}

// Where the transport splits large sends between both sides (2 ranks, a CPU each), the
// 2-rank broadcast leaves the arena from 64 KiB; elsewhere it stays up to 512 KiB.
TEST(Tuner, SplitSendsMoveTheTwoRankBroadcastCrossover) {
  using C = Collective;
  EXPECT_EQ(arena_crossover(C::kBroadcast, 2, true, false, true), 64 * K);
  EXPECT_EQ(arena_crossover(C::kBroadcast, 2, true, true, true), 64 * K) << "whatever the probe found";
  EXPECT_EQ(arena_crossover(C::kBroadcast, 2, true, false, false), 512 * K) << "no split sends";
  EXPECT_EQ(arena_crossover(C::kBroadcast, 4, true, false, true), 512 * K) << "more ranks";
  EXPECT_EQ(arena_crossover(C::kAllgather, 2, true, false, true), 128 * K) << "only broadcast moves";
}

// scatter's and reduce_scatter's n blocks stay in the arena longer the more ranks share it.
TEST(Tuner, ScatterCrossoversGrowWithTheRanks) {
  using C = Collective;
  EXPECT_EQ(arena_crossover(C::kScatter, 2), 32 * K);
  EXPECT_EQ(arena_crossover(C::kScatter, 3), 128 * K);
  EXPECT_EQ(arena_crossover(C::kScatter, 4), 128 * K);
  EXPECT_EQ(arena_crossover(C::kScatter, 8), 256 * K);
  EXPECT_EQ(arena_crossover(C::kReduceScatter, 2), 256 * K);
  EXPECT_EQ(arena_crossover(C::kReduceScatter, 4), 256 * K);
  EXPECT_EQ(arena_crossover(C::kReduceScatter, 8), 512 * K);
  EXPECT_EQ(arena_crossover(C::kReduce, 4), 128 * K) << "reduce keeps its own";
  EXPECT_EQ(arena_crossover(C::kReduce, 2, true, false, true), 128 * K) << "split sends";
  EXPECT_EQ(arena_crossover(C::kReduce, 2, true, false, false), 256 * K);
  EXPECT_EQ(arena_crossover(C::kGather, 2), 32 * K);
}

// Where the arena probe finds cross-memory copies cheaper than hand-overs through the
// segment (Arena::cma_cheap()), 2-rank allgather, alltoall and allreduce leave the arena for
// "cma" at smaller sizes, 4-rank alltoall too; without cross-memory attach nothing changes.
TEST(Tuner, CheapCrossMemoryCopiesMoveTheArenaCrossovers) {
  using C = Collective;
  // The arena's own table (hand-overs cheap, or not measured).
  EXPECT_EQ(arena_crossover(C::kAllreduce, 2, true), SIZE_MAX);
  EXPECT_EQ(arena_crossover(C::kAllgather, 2, true), 128 * K);
  EXPECT_EQ(arena_crossover(C::kAlltoall, 2, true), 512 * K) << "one slot of blocks";
  EXPECT_EQ(arena_crossover(C::kAlltoall, 2, false), 8 * K) << "no cross-memory attach: the exchange next";
  EXPECT_EQ(arena_crossover(C::kAlltoall, 4, true), 128 * K);
  EXPECT_FALSE(cma_beyond_arena(C::kAllreduce, 2, false));
  // Cheap cross-memory copies.
  EXPECT_EQ(arena_crossover(C::kAllreduce, 2, true, true), 128 * K);
  EXPECT_EQ(arena_crossover(C::kAllreduce, 3, true, true), SIZE_MAX) << "more ranks stay in the arena";
  EXPECT_EQ(arena_crossover(C::kAllgather, 2, true, true), 4 * K);
  EXPECT_EQ(arena_crossover(C::kAllgather, 4, true, true), 128 * K);
  EXPECT_EQ(arena_crossover(C::kAlltoall, 2, true, true), 16 * K);
  EXPECT_EQ(arena_crossover(C::kAlltoall, 4, true, true), 64 * K);
  EXPECT_TRUE(cma_beyond_arena(C::kAllreduce, 2, true));
  EXPECT_FALSE(cma_beyond_arena(C::kAllreduce, 3, true));
  EXPECT_TRUE(cma_beyond_arena(C::kAllgather, 2, true));
  EXPECT_TRUE(cma_beyond_arena(C::kAlltoall, 4, false));
  // No cross-memory attach: "cheap" cannot apply.
  EXPECT_EQ(arena_crossover(C::kAllreduce, 2, false, true), SIZE_MAX);
  EXPECT_EQ(arena_crossover(C::kAllgather, 2, false, true), 8 * K);
  EXPECT_EQ(arena_crossover(C::kAlltoall, 2, false, true), 8 * K);
  // Other collectives keep their crossovers.
  EXPECT_EQ(arena_crossover(C::kBroadcast, 2, true, true), arena_crossover(C::kBroadcast, 2, true));
  EXPECT_EQ(arena_crossover(C::kReduceScatter, 4, true, true), arena_crossover(C::kReduceScatter, 4, true));
}

}  // namespace
}  // namespace podnet::detail
