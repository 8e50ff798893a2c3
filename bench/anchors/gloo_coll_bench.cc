// gloo_coll_bench: Gloo anchor for bench/compare_coll.sh and compare_lab.sh (Debian libgloo-dev).
//
//   gloo_coll_bench RANK NRANKS STOREDIR COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP
//                   [BIGITERS BIGBYTES]
//
// One process per rank, started by the caller; they meet through a gloo::rendezvous::FileStore
// in STOREDIR (empty, unique per job) and connect with the TCP transport on 127.0.0.1, or on
// the interface named by GLOO_BENCH_IFACE (e.g. eth0 in a podnet lab host).
// COLL: allreduce_ring_chunked (gloo::AllreduceRingChunked), allreduce_halving_doubling
// (gloo::AllreduceHalvingDoubling), allgather (gloo::AllgatherRing), broadcast
// (gloo::BroadcastOneToAll, root 0), reduce_scatter (gloo::ReduceScatterHalvingDoubling, in
// place, equal blocks) or alltoall (gloo::alltoall). float32, sum.
// Sizes follow `podnet bench coll`: the larger buffer of the call (allgather: the whole
// output; alltoall and reduce_scatter: the whole input), rounded down to 4 bytes (times the
// ranks for blocks).
// Gloo's allreduce and broadcast algorithms work in place (there is no out-of-place form).
// Per size: WARMUP untimed calls, a barrier, ITERS timed calls (BIGITERS when size >=
// BIGBYTES); time = loop time / ITERS, the maximum over the ranks. Rank 0 prints one JSON
// line per size: {"coll":..., "algo":..., "bytes":..., "time_us":...}.
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 10) {
    std::fprintf(stderr,
                 "usage: %s RANK NRANKS STOREDIR COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP "
                 "[BIGITERS BIGBYTES]\n",
                 argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]), n = std::atoi(argv[2]);
  const std::string dir = argv[3], coll = argv[4];
  const long long minb = std::atoll(argv[5]), maxb = std::atoll(argv[6]);
  const long long factor = std::atoll(argv[7]);
  const int iters = std::atoi(argv[8]), warm = std::atoi(argv[9]);
  const int bigiters = argc > 10 ? std::atoi(argv[10]) : iters;
  const long long bigbytes = argc > 11 ? std::atoll(argv[11]) : (1LL << 62);
  if (coll != "allreduce_ring_chunked" && coll != "allreduce_halving_doubling" &&
      coll != "allgather" && coll != "broadcast" && coll != "alltoall" && coll != "reduce_scatter") {
    std::fprintf(stderr, "unknown collective %s\n", coll.c_str());
    return 2;
  }
  const bool blocks = coll == "allgather" || coll == "alltoall" || coll == "reduce_scatter";

  gloo::transport::tcp::attr attr;
  if (const char* iface = std::getenv("GLOO_BENCH_IFACE"); iface != nullptr && *iface != '\0')
    attr.iface = iface;
  else
    attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);

  gloo::BarrierAllToAll barrier(ctx);
  double tval = 0;
  std::vector<double*> tptr{&tval};
  gloo::AllreduceRing<double> tmax(ctx, tptr, 1, gloo::ReductionFunction<double>::max);

  const long long unit = 4LL * (blocks ? n : 1);
  for (long long size = minb; size <= maxb; size *= factor) {
    const long long bytes = size / unit * unit;
    if (bytes == 0) {
      if (factor <= 1) break;
      continue;
    }
    const long long count = bytes / 4;
    const long long blk = blocks ? count / n : count;
    std::vector<float> in(coll == "allgather" ? blk : count, 1.0f + rank);
    std::vector<float> out(blocks && coll != "reduce_scatter" ? count : 0, 0.0f);
    std::unique_ptr<gloo::Algorithm> algo;
    std::unique_ptr<gloo::AlltoallOptions> a2a;
    std::vector<float*> ptrs{in.data()};
    std::vector<const float*> cptrs{in.data()};
    if (coll == "allreduce_ring_chunked")
      algo = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, (int)count);
    else if (coll == "allreduce_halving_doubling")
      algo = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, (int)count);
    else if (coll == "allgather")
      algo = std::make_unique<gloo::AllgatherRing<float>>(ctx, cptrs, out.data(), (int)blk);
    else if (coll == "broadcast")
      algo = std::make_unique<gloo::BroadcastOneToAll<float>>(ctx, ptrs, (size_t)count, 0);
    else if (coll == "reduce_scatter")
      algo = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(ctx, ptrs, (int)count,
                                                                         std::vector<int>(n, (int)blk));
    else {
      a2a = std::make_unique<gloo::AlltoallOptions>(ctx);
      a2a->setInput(in.data(), (size_t)count);
      a2a->setOutput(out.data(), (size_t)count);
      a2a->setTimeout(std::chrono::seconds(600));
    }
    auto call = [&] {
      if (algo) algo->run();
      else gloo::alltoall(*a2a);
    };
    const int it = bytes >= bigbytes ? bigiters : iters;
    for (int i = 0; i < warm; ++i) call();
    barrier.run();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < it; ++i) call();
    tval = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() / it;
    tmax.run();
    if (rank == 0) {
      const bool ar = coll.rfind("allreduce", 0) == 0;
      std::printf("{\"coll\": \"%s\", \"algo\": \"%s\", \"bytes\": %lld, \"ranks\": %d, "
                  "\"iters\": %d, \"time_us\": %.3f}\n",
                  ar ? "allreduce" : coll.c_str(), coll.c_str(), bytes, n, it, tval);
      std::fflush(stdout);
    }
    if (factor <= 1) break;
  }
  barrier.run();
  // Leave without tearing the pairs down while a peer may still be reading its last barrier
  // message (Gloo's TCP loop thread aborts on "Connection closed by peer").
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::_Exit(0);
}
