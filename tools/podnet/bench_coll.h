// The collective benchmark behind `podnet bench coll`, with nccl-tests' conventions so that
// its numbers read like theirs (all_reduce_perf, all_gather_perf, ...):
//   - a size is a byte count per rank as nccl-tests prints it: the larger of the send and the
//     receive buffer (allgather and gather: the whole output; reduce_scatter and scatter: the
//     whole input), and `count` is the element count the call takes (per rank, or per block
//     for allgather, reduce_scatter, alltoall, gather and scatter);
//   - algbw = size / time (GB/s = 10^9 bytes/s); busbw = algbw * a factor per collective
//     (busbw_factor());
//   - time = the timed loop (after a barrier) divided by its iterations, on the slowest rank
//     (nccl-tests averages the ranks; see measure() for why this does not);
//   - with check on, one extra call per row and place runs on a fresh rank/index pattern and
//     every rank compares its output with a reference computed in double; the wrong element
//     counts are summed over the ranks.
// Thread-safety: a CollBench is used by one thread, like the communicator it drives. Every
// rank must run the same cases in the same order (they are collective calls).
#pragma once

#include <podnet/coll.h>
#include <podnet/status.h>
#include <podnet/xfer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace podnet {
class World;
}

namespace podnet::tool {

struct CollOptions {
  std::vector<Collective> collectives;  // in the order they run
  std::vector<DataType> dtypes;
  std::vector<ReduceOp> ops;  // for the reducing collectives; the others print "none"
  uint64_t min_bytes = 8, max_bytes = 32ull << 20;
  uint64_t step_factor = 2;  // sizes grow by this factor ...
  uint64_t step_bytes = 0;   // ... or, when > 0, by this many bytes
  int warmup = 5, iters = 20;
  bool check = true;
  int root = 0;           // rooted collectives; -1: every rank in turn
  std::string algorithm;  // -a: forced with Communicator::set_algorithm; empty: the tuner
  double min_busbw = -1;  // GB/s; < 0: no threshold
  double link_gbps = 0;   // Gbit/s; 0: no link column
  bool json = false;
  std::string plot;  // PNG path; empty: no plot
  bool alloc = false;  // --alloc: buffers from Context::allocate_memory
};

// One measurement: a collective at one size, type, op and root.
struct CollCase {
  Collective coll = Collective::kAllreduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;       // -1 for collectives without a root
  uint64_t bytes = 0;  // the size asked for (-b ... -e); the row's size may round down
};

struct PlaceResult {
  double time_us = 0;           // per call, on the slowest rank
  double algbw = 0, busbw = 0;  // GB/s
  uint64_t wrong = 0;           // elements, summed over the ranks (0 without check)
  std::string algorithm;        // what the communicator used for these calls (last_algorithm)
};

struct CollRow {
  CollCase c;
  uint64_t size = 0;   // bytes, as nccl-tests prints it
  uint64_t count = 0;  // elements per call argument
  PlaceResult out_of_place, in_place;
  // Out of place's algorithm, or "out-of-place/in-place" where they differ.
  std::string algorithm() const {
    return out_of_place.algorithm == in_place.algorithm ? out_of_place.algorithm
                                                        : out_of_place.algorithm + "/" + in_place.algorithm;
  }
};

// The collectives `podnet bench coll` knows, by name, in the order `all` runs them.
const std::vector<Collective>& bench_collectives();
bool is_reducing(Collective c);  // allreduce, reduce, reduce_scatter
bool is_rooted(Collective c);    // broadcast, reduce, gather, scatter
// nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall,
// gather, scatter (n-1)/n; broadcast, reduce 1; barrier 0 (it moves no payload).
double busbw_factor(Collective c, int nranks);
// Element counts as nccl-tests derives them from a size: `param` is the count argument of the
// call, send and recv the buffers' lengths, all in elements.
struct CollCounts {
  uint64_t param = 0, send = 0, recv = 0;
};
CollCounts coll_counts(Collective c, uint64_t bytes, size_t elem_size, int nranks);
// -b ... -e by -f (or by -i when step_bytes > 0).
std::vector<uint64_t> sweep_sizes(const CollOptions& o);
// Every case of one collective, in nccl-tests' order: type, op, root, size.
std::vector<CollCase> cases_for(Collective c, const CollOptions& o, int nranks);

class CollBench {
 public:
  // Collective over `comm`: gathers every rank's pid and host name for the header.
  static Result<std::unique_ptr<CollBench>> create(World& world, Communicator& comm, const CollOptions& o);
  ~CollBench();

  // Runs one case on every rank: warm-up, barrier, timed loop, check; out of place, then in
  // place. Every rank gets the same row (times and wrong counts are reduced over the ranks).
  Result<CollRow> measure(const CollCase& c);

  // "pid 1234 on host1", one per rank.
  const std::vector<std::string>& rank_lines() const { return rank_lines_; }
  // The transports this rank's endpoints use ("tcp", "shm+tcp"), "-" with one rank.
  const std::string& transport() const { return transport_; }

 private:
  CollBench(Communicator& comm, const CollOptions& o) : comm_(comm), o_(o) {}
  Status launch(const CollCase& c, const CollCounts& n, bool in_place);
  Status time_place(const CollCase& c, const CollCounts& n, bool in_place, double& seconds);
  Result<uint64_t> check_place(const CollCase& c, const CollCounts& n, bool in_place);

  Communicator& comm_;
  const CollOptions& o_;
  // max_bytes each (recv is the in-place buffer): vectors, or with --alloc two regions
  // from Context::allocate_memory.
  std::vector<std::byte> send_vec_, recv_vec_;
  MemoryRegion send_mr_, recv_mr_;
  std::byte* send_ = nullptr;
  std::byte* recv_ = nullptr;
  std::vector<std::string> rank_lines_;
  std::string transport_;
};

}  // namespace podnet::tool
