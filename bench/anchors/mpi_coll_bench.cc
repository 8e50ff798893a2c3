// mpi_coll_bench: Open MPI anchor for bench/compare_coll.sh and compare_lab.sh.
//
//   mpirun -n N ... mpi_coll_bench COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP [BIGITERS BIGBYTES]
//
// COLL: allreduce, allgather, broadcast, reduce_scatter (MPI_Reduce_scatter_block) or
// alltoall. float32 elements, sum for allreduce and reduce_scatter, root 0 for broadcast.
// Sizes follow `podnet bench coll`: the larger buffer of the call (allgather: the whole
// output; alltoall and reduce_scatter: the whole input), rounded down to a multiple of
// 4 bytes (times the ranks where the call works on blocks). Per size: WARMUP untimed calls,
// MPI_Barrier, ITERS timed calls (BIGITERS when size >= BIGBYTES); time = loop time / ITERS,
// the maximum over the ranks (MPI_Reduce MAX). Out of place, except broadcast (MPI_Bcast works
// in place only). Rank 0 prints one JSON line
// per size: {"coll":..., "bytes":..., "time_us":...}.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 7) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: %s COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP [BIGITERS BIGBYTES]\n",
                   argv[0]);
    MPI_Finalize();
    return 2;
  }
  const std::string coll = argv[1];
  const long long minb = std::atoll(argv[2]), maxb = std::atoll(argv[3]);
  const long long factor = std::atoll(argv[4]);
  const int iters = std::atoi(argv[5]), warm = std::atoi(argv[6]);
  const int bigiters = argc > 7 ? std::atoi(argv[7]) : iters;
  const long long bigbytes = argc > 8 ? std::atoll(argv[8]) : (1LL << 62);
  const bool blocks = coll == "allgather" || coll == "alltoall" || coll == "reduce_scatter";
  if (coll != "allreduce" && coll != "allgather" && coll != "broadcast" && coll != "alltoall" &&
      coll != "reduce_scatter") {
    if (rank == 0) std::fprintf(stderr, "unknown collective %s\n", coll.c_str());
    MPI_Finalize();
    return 2;
  }
  const long long unit = 4LL * (blocks ? n : 1);
  std::vector<float> in, out;
  for (long long size = minb; size <= maxb; size *= factor) {
    const long long bytes = size / unit * unit;
    if (bytes == 0) {
      if (factor <= 1) break;
      continue;
    }
    const long long count = bytes / 4;                  // elements of the larger buffer
    const int blk = static_cast<int>(blocks ? count / n : count);  // per-block count
    in.assign(coll == "allgather" ? blk : count, 1.0f + rank);
    out.assign(count, 0.0f);
    auto call = [&] {
      if (coll == "allreduce")
        MPI_Allreduce(in.data(), out.data(), blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (coll == "allgather")
        MPI_Allgather(in.data(), blk, MPI_FLOAT, out.data(), blk, MPI_FLOAT, MPI_COMM_WORLD);
      else if (coll == "alltoall")
        MPI_Alltoall(in.data(), blk, MPI_FLOAT, out.data(), blk, MPI_FLOAT, MPI_COMM_WORLD);
      else if (coll == "reduce_scatter")
        MPI_Reduce_scatter_block(in.data(), out.data(), blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else  // MPI_Bcast has no out-of-place form: compared with podnet's in-place broadcast
        MPI_Bcast(out.data(), blk, MPI_FLOAT, 0, MPI_COMM_WORLD);
    };
    const int it = bytes >= bigbytes ? bigiters : iters;
    for (int i = 0; i < warm; ++i) call();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < it; ++i) call();
    double t = (MPI_Wtime() - t0) / it * 1e6, tmax = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("{\"coll\": \"%s\", \"bytes\": %lld, \"ranks\": %d, \"iters\": %d, \"time_us\": %.3f}\n",
                  coll.c_str(), bytes, n, it, tmax);
      std::fflush(stdout);
    }
    if (factor <= 1) break;
  }
  MPI_Finalize();
  return 0;
}
