// `podnet tune`: measures every algorithm of each collective over a size sweep on this pod
// and writes the fastest per size as a tuner table (PODNET_TUNER_FILE reads it back).
#include <cstdio>
#include <fstream>
#include <map>

#include "base/config.h"
#include "bench_coll.h"
#include "coll/tuner.h"
#include "commands.h"
#include "xfer/world.h"

namespace podnet::tool {
namespace {

struct TuneOptions {
  std::string output = "podnet-tuner.json";
  std::string min_bytes = "8", max_bytes = "16M";
  uint64_t factor = 4;
  int iters = 10, warmup = 2;
};

int run_tune(const TuneOptions& t) {
  auto lo = parse_size(t.min_bytes), hi = parse_size(t.max_bytes);
  if (!lo.ok() || !hi.ok() || *lo == 0 || *hi < *lo || t.factor < 2) {
    std::fprintf(stderr, "podnet tune: bad sweep -b %s -e %s -f %llu\n", t.min_bytes.c_str(), t.max_bytes.c_str(),
                 static_cast<unsigned long long>(t.factor));
    return 2;
  }
  auto world = World::create();
  if (!world.ok()) {
    std::fprintf(stderr, "podnet tune: %s\n", world.status().to_string().c_str());
    return 1;
  }
  auto comm = Communicator::create(**world);
  if (!comm.ok()) {
    std::fprintf(stderr, "podnet tune: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  CollOptions o;
  o.min_bytes = *lo;
  o.max_bytes = *hi;
  o.step_factor = t.factor;
  o.iters = t.iters;
  o.warmup = t.warmup;
  o.check = false;
  auto bench = CollBench::create(**world, **comm, o);
  if (!bench.ok()) {
    std::fprintf(stderr, "podnet tune: %s\n", bench.status().to_string().c_str());
    return 1;
  }
  const int n = (*comm)->size();
  const bool root = (*world)->rank() == 0;
  detail::TuneTable table;
  table.nranks = n;
  for (Collective c : {Collective::kAllreduce, Collective::kBroadcast, Collective::kAllgather,
                       Collective::kReduceScatter, Collective::kAlltoall}) {
    const auto& algos = detail::algorithms_for(c);
    std::map<uint64_t, std::pair<double, std::string>> best;  // key bytes -> (time, algorithm)
    if (root) std::printf("# %s on %d ranks: time per call (us) by algorithm\n", std::string(collective_name(c)).c_str(), n);
    for (std::string_view a : algos) {
      if (Status st = (*comm)->set_algorithm(c, a); !st.ok()) {
        std::fprintf(stderr, "podnet tune: %s\n", st.to_string().c_str());
        return 1;
      }
      for (uint64_t bytes : sweep_sizes(o)) {
        CollCase k{c, DataType::kFloat32, ReduceOp::kSum, is_rooted(c) ? 0 : -1, bytes};
        auto row = (*bench)->measure(k);
        if (!row.ok()) {
          std::fprintf(stderr, "podnet tune: %s\n", row.status().to_string().c_str());
          return 1;
        }
        // The key is what the tuner is asked with: the call's count in bytes.
        uint64_t key = row->count * dtype_size(DataType::kFloat32);
        double us = row->out_of_place.time_us;
        // A forced algorithm that cannot run here (shm beyond the arena, or without one)
        // falls back to another; that row says nothing about the forced one.
        if ((*comm)->last_algorithm(c) != a) {
          if (root) std::printf("  %-20s %12llu B  (not available here: %s ran)\n", std::string(a).c_str(),
                                static_cast<unsigned long long>(key), (*comm)->last_algorithm(c).c_str());
          continue;
        }
        if (root) std::printf("  %-20s %12llu B  %10.2f us\n", std::string(a).c_str(), static_cast<unsigned long long>(key), us);
        auto it = best.find(key);
        if (it == best.end() || us < it->second.first) best[key] = {us, std::string(a)};
      }
    }
    (void)(*comm)->set_algorithm(c, "");
    // Runs of the same winner become one entry.
    for (auto it = best.begin(); it != best.end(); ++it) {
      auto next = std::next(it);
      if (next != best.end() && next->second.second == it->second.second) continue;
      table.entries.push_back({c, it->first, it->second.second});
    }
  }
  if (root) {
    std::ofstream out(t.output);
    out << detail::format_tune_table(table);
    if (!out) {
      std::fprintf(stderr, "podnet tune: cannot write %s\n", t.output.c_str());
      return 1;
    }
    std::printf("# wrote %s (%zu entries); use it with PODNET_TUNER_FILE=%s\n", t.output.c_str(), table.entries.size(),
                t.output.c_str());
  }
  return 0;
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto t = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand("tune", "measure every collective algorithm on this pod and write a tuner table");
  cmd->footer(
      "Run on every rank: podnet run -n 4 -- podnet tune -o tuner.json\n"
      "For allreduce, broadcast, allgather, reduce_scatter and alltoall, every algorithm is timed\n"
      "(float32, out of place, the slowest rank) at each size of the sweep; the fastest per size is\n"
      "written as JSON {nranks, entries:[{collective, max_bytes, algorithm}]}, where max_bytes is the\n"
      "call's count in bytes (per rank, or per block). PODNET_TUNER_FILE=FILE makes communicators\n"
      "with the same number of ranks use it instead of the built-in table.");
  cmd->add_option("-o,--output", t->output, "where rank 0 writes the table")->capture_default_str();
  cmd->add_option("-b,--minbytes", t->min_bytes, "smallest size (K/M/G)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", t->max_bytes, "largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", t->factor, "size factor between rows")->capture_default_str();
  cmd->add_option("-n,--iters", t->iters, "timed calls per size and algorithm")->capture_default_str();
  cmd->add_option("-w,--warmup", t->warmup, "untimed calls first")->capture_default_str();
  cmd->callback([t] { set_exit_code(run_tune(*t)); });
}

}  // namespace podnet::tool
