// The point-to-point benchmark behind `podnet bench p2p`, between rank 0 (initiator) and
// rank 1 (target). Conventions follow perftest: bandwidth at remote completion, latency
// as RTT/2 for ping-pong operations (send, write_notify) and RTT for write and read (the
// operation completes when the target's acknowledgement or data is back).
#pragma once

#include <podnet/status.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podnet {
class World;
}

namespace podnet::tool {

struct P2pOptions {
  std::string op = "write";     // write | read | send | write_notify
  std::string mode = "bw";      // bw | lat
  std::vector<uint64_t> sizes;  // bytes
  int iters = 0;                // 0: 5000 for bw, 1000 for lat
  int warmup = -1;              // -1: iters / 10
  int window = 64;              // outstanding operations in bw mode (perftest's tx depth)
  bool check = false;           // verify every payload
  bool echo = false;            // send latency: the target replies with what it received (--check too)
  bool json = false;
  bool all_pairs = false;       // every ordered pair of ranks in turn (bench_p2p_pairs.cc)
  bool hugepages = false;       // buffers on transparent huge pages (perftest's --use_hugepages)
  bool alloc = false;           // buffers from Context::allocate_memory (shm: mapped one-sided copies)
};

struct P2pRow {
  uint64_t bytes = 0;
  int iters = 0;
  double seconds = 0;
  // bw
  double gbytes_per_s = 0, gbits_per_s = 0, mpps = 0;
  // lat, microseconds (already halved for RTT/2 operations)
  double t_min = 0, t_typical = 0, t_avg = 0, t_p99 = 0, t_p999 = 0, t_max = 0;
  uint64_t wrong = 0;
  uint64_t hugepage_bytes = 0;  // --hugepages: the initiator's buffer bytes on huge pages after the run
};

// Runs the benchmark on every rank (ranks other than 0 and 1 idle). Rank 0 returns the rows.
// Latency mode: send, write_notify and write are ping-pongs (RTT/2); read is the RTT.
inline bool is_pingpong(const P2pOptions& o) { return o.op != "read"; }
// The send ping-pong's target replies with the payload it received (--echo; --check verifies it).
inline bool echoes(const P2pOptions& o) { return o.check || o.echo; }
Result<std::vector<P2pRow>> run_p2p(World& world, const P2pOptions& o);
// The benchmark between this rank and `peer`, which must run the same call with `initiator`
// the other way round. The initiator returns the rows.
Result<std::vector<P2pRow>> run_p2p_pair(World& world, int peer, bool initiator, const P2pOptions& o);

// --all-pairs: every ordered pair (i -> j) in turn, one pair at a time, the others idle.
struct P2pMatrix {
  std::vector<std::string> hosts;              // per rank: its hostname (a lab host's name under --lab)
  std::vector<std::vector<double>> value;      // [from][to]: Gb/s (bw) or t_typical us (lat); diagonal 0
  uint64_t bytes = 0;
  int iters = 0;
  uint64_t wrong = 0;
};
// Every rank runs it; rank 0 returns the filled matrix (the others an empty one).
Result<P2pMatrix> run_p2p_all_pairs(World& world, const P2pOptions& o);
void print_p2p_matrix(const P2pOptions& o, const P2pMatrix& m);
nlohmann::json p2p_matrix_json(const P2pOptions& o, const P2pMatrix& m);
// The clock that times latency iterations (CycleClock::for_benchmarks: "tsc", "tsc+lfence",
// "cntvct" or "clock_gettime"), as a latency run used it.
std::string_view p2p_timer_name();
void print_p2p(const P2pOptions& o, const World& world, const std::vector<P2pRow>& rows, std::string_view peer,
               std::string_view transport);
nlohmann::json p2p_json(const P2pOptions& o, const std::vector<P2pRow>& rows, std::string_view transport);

}  // namespace podnet::tool
