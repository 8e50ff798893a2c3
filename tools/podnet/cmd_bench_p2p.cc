// `podnet bench p2p`: point-to-point bandwidth and latency between rank 0 and rank 1.
#include <cstdio>
#include <iostream>

#include "base/config.h"
#include "bench_p2p.h"
#include "commands.h"
#include "xfer/world.h"

namespace podnet::tool {
namespace {

std::vector<uint64_t> all_sizes() {
  std::vector<uint64_t> v;
  for (uint64_t s = 1; s <= (64ull << 20); s *= 2) v.push_back(s);
  return v;
}

int run_all_pairs(World& world, const P2pOptions& o) {
  auto m = run_p2p_all_pairs(world, o);
  if (!m.ok()) {
    std::fprintf(stderr, "podnet bench p2p: rank %d: %s\n", world.rank(), m.status().to_string().c_str());
    return 1;
  }
  if (world.rank() != 0) return 0;
  if (o.json) std::cout << p2p_matrix_json(o, *m).dump(2) << std::endl;
  else print_p2p_matrix(o, *m);
  if (m->wrong > 0) std::fprintf(stderr, "podnet bench p2p: %llu wrong payloads\n", static_cast<unsigned long long>(m->wrong));
  return m->wrong > 0 ? 3 : 0;
}

int run_bench_p2p(const P2pOptions& in, const std::string& size_text, bool all) {
  P2pOptions o = in;
  if (all) {
    o.sizes = all_sizes();
  } else {
    auto s = parse_size(size_text);
    if (!s.ok()) {
      std::fprintf(stderr, "podnet bench p2p: -s '%s': %s\n", size_text.c_str(), s.status().message().c_str());
      return 2;
    }
    o.sizes = {*s};
  }
  auto world = World::create();
  if (!world.ok()) {
    std::fprintf(stderr, "podnet bench p2p: %s\n", world.status().to_string().c_str());
    return 1;
  }
  if (o.all_pairs) return run_all_pairs(**world, o);
  auto rows = run_p2p(**world, o);
  if (!rows.ok()) {
    std::fprintf(stderr, "podnet bench p2p: rank %d: %s\n", (*world)->rank(), rows.status().to_string().c_str());
    return 1;
  }
  uint64_t wrong = 0;
  for (auto& r : *rows) wrong += r.wrong;
  if ((*world)->rank() == 0) {
    auto ep = (*world)->peer(1);
    std::string peer = ep.ok() ? (*ep)->peer_name() : "rank 1";
    std::string transport = ep.ok() ? std::string((*ep)->transport()) : "?";
    if (o.json) std::cout << p2p_json(o, *rows, transport).dump(2) << std::endl;
    else print_p2p(o, **world, *rows, peer, transport);
    if (wrong > 0) std::fprintf(stderr, "podnet bench p2p: %llu wrong payloads\n", static_cast<unsigned long long>(wrong));
  }
  return wrong > 0 ? 3 : 0;
}

}  // namespace

void add_bench_p2p_command(CLI::App& bench) {
  auto o = std::make_shared<P2pOptions>();
  auto size = std::make_shared<std::string>("65536");
  auto all = std::make_shared<bool>(false);
  CLI::App* p = bench.add_subcommand("p2p", "point-to-point bandwidth / latency between rank 0 and rank 1, like perftest");
  p->footer(
      "Run with two ranks, e.g.:\n"
      "  podnet run -n 2 podnet bench p2p -o write -m bw -a\n"
      "  podnet run -n 2 podnet bench p2p -o send -m lat -s 8 -n 10000\n"
      "Bandwidth is measured at remote completion (GB/s = 10^9 bytes/s, Gb/s = 10^9 bits/s).\n"
      "Latency: send, write_notify and write are ping-pongs reported as RTT/2 (write as ib_write_lat:\n"
      "each side watches the last byte of its buffer); read reports the full RTT (until the data is back).\n"
      "--all-pairs: any number of ranks; every ordered pair runs alone in turn, e.g. on a lab:\n"
      "  podnet run --lab demo -n 8 -- podnet bench p2p --all-pairs -s 1M\n"
      "  A rank whose median over its pairs is below 0.75x the median of all pairs is an outlier.\n"
      "Exit status: 0 ok, 1 error, 2 bad arguments, 3 wrong payloads found by --check.");
  p->add_option("-o,--op", o->op, "operation: write, read, send, write_notify")
      ->check(CLI::IsMember({"write", "read", "send", "write_notify"}))
      ->capture_default_str();
  p->add_option("-m,--mode", o->mode, "bw (bandwidth) or lat (latency)")
      ->check(CLI::IsMember({"bw", "lat"}))
      ->capture_default_str();
  p->add_option("-s,--size", *size, "message size in bytes (K/M/G suffixes)")->capture_default_str();
  p->add_flag("-a,--all", *all, "sweep sizes 1 B ... 64 MiB in powers of two");
  p->add_option("-n,--iters", o->iters, "timed iterations per size (default 5000 bw / 1000 lat, capped at ~2 GiB per size)");
  p->add_option("-w,--warmup", o->warmup, "untimed warm-up iterations (default iters/10)");
  p->add_option("-t,--window", o->window, "operations in flight in bw mode (perftest's tx depth)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  p->add_flag("-c,--check", o->check, "verify every payload (counts #wrong; exit 3 if any)");
  p->add_flag("--echo", o->echo,
              "send latency: the target replies with the payload it received (its lines then come from the other "
              "core's cache, as for data an application just wrote); default: from a buffer the loop does not write, "
              "as ucx_perftest's tag_lat (--check echoes too)");
  p->add_flag("--hugepages", o->hugepages,
              "put the buffers on 2 MiB transparent huge pages (madvise; as perftest's --use_hugepages): fewer "
              "TLB misses in the copies of large messages; an error if THP is 'never'");
  p->add_flag("--alloc", o->alloc,
              "take the buffers from Context::allocate_memory instead of registering heap memory: over shm, "
              "one-sided write and read are then a memcpy through a mapping of the peer's memory (PODNET_SHM_MAP)")
      ->excludes("--hugepages");
  p->add_flag("--json", o->json, "print JSON instead of the table");
  p->add_flag("--all-pairs", o->all_pairs,
              "every ordered pair of ranks in turn (any number of ranks): a matrix, per-rank medians and the "
              "outliers; without -n each pair moves ~32 MiB in bw mode");
  p->callback([o, size, all] { set_exit_code(run_bench_p2p(*o, *size, *all)); });
}

}  // namespace podnet::tool
