// `podnet bench`: the benchmark family. Each benchmark registers its own subcommand.
#include "commands.h"

namespace podnet::tool {

void add_bench_p2p_command(CLI::App& bench);  // cmd_bench_p2p.cc
void add_bench_coll_command(CLI::App& bench);  // cmd_bench_coll.cc

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that read like perftest and nccl-tests");
  bench->require_subcommand(1);
  add_bench_p2p_command(*bench);
  add_bench_coll_command(*bench);
}

}  // namespace podnet::tool
