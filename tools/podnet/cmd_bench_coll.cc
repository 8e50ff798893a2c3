// `podnet bench coll`: collective benchmarks that read like nccl-tests (all_reduce_perf ...).
// Every rank runs this; rank 0 prints. Measuring and checking live in bench_coll.cc.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <map>

#include "base/config.h"
#include "bench_coll.h"
#include "coll/dtype.h"
#include "commands.h"
#include "xfer/world.h"

namespace podnet::tool {
namespace {

constexpr int kExitError = 1, kExitUsage = 2, kExitWrong = 3, kExitSlow = 4;

constexpr const char* kFooter = R"(Run on every rank, e.g.:
  podnet run -n 4 -- podnet bench coll allreduce -b 8 -e 128M -f 2 -w 5 -n 20 -c 1 -d float -o sum
  podnet run -n 8 -- podnet bench coll all -b 8 -e 1M -f 4 --json
COLLECTIVE: allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, gather, scatter,
barrier, or all (each in that order; barrier is one row without payload).

Columns, as nccl-tests prints them (rank 0 only):
  size      bytes per rank: the larger buffer of the call (allgather, gather: the whole
            output; reduce_scatter, scatter, alltoall: the whole input); sizes not a
            multiple of the element size (times the ranks, where blocks) round down
  count     elements of the call's count argument (per block for allgather,
            reduce_scatter, alltoall, gather, scatter)
  type      element type; redop: reduction ("none" where the collective has none)
  root      root rank of broadcast, reduce, gather, scatter; -1 for the others
  then out-of-place and in-place, each:
  time      microseconds per call: the timed loop (after -w warm-up calls and a barrier)
            divided by -n, on the slowest rank (nccl-tests averages the ranks, but the
            leaves of a rooted collective finish as soon as their sends are queued)
  algbw     size / time, GB/s (10^9 bytes/s)
  busbw     algbw * factor, GB/s, comparable with the link's speed whatever the ranks:
            allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
            broadcast, reduce 1
  #wrong    elements that differ from the reference, summed over the ranks (N/A with -c 0)
  algorithm the algorithm the communicator ran (-a forces one); "A/B" when the tuner chose
            A out of place and B in place (JSON: each place's "algorithm"; the row's
            "algorithm" is out of place's); transport: rank 0's links
  link%     with --link-rate: busbw as a percentage of the link's rate, out-of-place and
            in-place
In place: send and receive share one buffer the way NCCL and MPI lay it out (allgather:
each rank's input is its block of the output; reduce_scatter: the output is the rank's block
of the input). broadcast has only an in-place form: out of place, the root copies its input
into the buffer first, inside the timed call.
Checking (-c 1): after the timed loops, one more call per row and place runs on a pattern
of small integers that depends on the rank and the index (exact in every type); every rank
compares its output with a reference computed in double: exactly, except avg on half and
bfloat16 (relative 1e-2) and on float and double (1e-6).
Footer: "# Out of bounds values" (total #wrong, OK or FAILED) and "# Avg bus bandwidth" (the
mean busbw over every row and place; barrier rows excluded).
Gates and extras: --min-busbw X fails the run (exit 4) when that average is below X GB/s;
--link-rate 25G adds the link% columns; --plot FILE.png draws busbw against size with gnuplot
(one colour per collective/type/op/root, out-of-place solid, in-place dashed, the link rate as
a dotted line); without gnuplot the run stops before measuring anything. -a NAME forces an
algorithm on every selected collective that has one of that name (the others say so in their
table header and keep the tuner's choice); all ranks must pass the same options.
Exit status: 0 ok, 1 error (including a plot that could not be written), 2 bad arguments,
3 wrong results, 4 average bus bandwidth below --min-busbw.)";

struct Args {
  std::string collective, min_bytes = "8", max_bytes = "32M", step_bytes, dtype = "float", op = "sum";
  std::string link_rate;
  int check = 1;
  CLI::Option* factor_opt = nullptr;
  CLI::Option* step_opt = nullptr;
};

// "25G", "100Gbps", "400Gb/s", "1.6T", "800M" (bits per second; plain numbers are Gbit/s).
Result<double> parse_link_rate(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || !(v > 0))
    return Status::InvalidArgument("--link-rate '{}': expected a rate in bits per second such as 25G, 100Gbps", text);
  std::string unit(p, end);
  if (unit.find('B') != std::string::npos)
    return Status::InvalidArgument("--link-rate '{}': give bits per second (25G, 100Gbps), not bytes", text);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 1;
  if (!unit.empty() && (unit[0] == 'k' || unit[0] == 'm' || unit[0] == 'g' || unit[0] == 't')) {
    scale = unit[0] == 'k' ? 1e-6 : unit[0] == 'm' ? 1e-3 : unit[0] == 'g' ? 1 : 1e3;
    unit.erase(0, 1);
  }
  if (!unit.empty() && unit != "b" && unit != "bps" && unit != "b/s" && unit != "bit/s" && unit != "bit")
    return Status::InvalidArgument("--link-rate '{}': unknown unit; expected e.g. 25G, 100Gbps, 400Gb/s, 1.6T", text);
  return v * scale;
}

Status parse_args(const Args& a, CollOptions& o) {
  if (a.collective == "all") {
    o.collectives = bench_collectives();
  } else {
    for (Collective c : bench_collectives())
      if (collective_name(c) == a.collective) o.collectives = {c};
    if (o.collectives.empty())
      return Status::InvalidArgument(
          "unknown collective '{}': expected allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, "
          "gather, scatter, barrier or all",
          a.collective);
  }
  auto size = [](const char* flag, const std::string& text) -> Result<uint64_t> {
    auto s = parse_size(text);
    if (!s.ok()) return s.status().with_context("{} '{}'", flag, text);
    return s;
  };
  PODNET_ASSIGN_OR_RETURN(o.min_bytes, size("-b", a.min_bytes));
  PODNET_ASSIGN_OR_RETURN(o.max_bytes, size("-e", a.max_bytes));
  if (o.min_bytes > o.max_bytes)
    return Status::InvalidArgument("-b {} is larger than -e {}", a.min_bytes, a.max_bytes);
  if (a.step_opt->count() > 0) {
    if (a.factor_opt->count() > 0) return Status::InvalidArgument("give -f (step factor) or -i (step bytes), not both");
    PODNET_ASSIGN_OR_RETURN(o.step_bytes, size("-i", a.step_bytes));
    if (o.step_bytes == 0) return Status::InvalidArgument("-i must be at least 1 byte");
  } else if (o.step_factor < 2) {
    return Status::InvalidArgument("-f {}: the step factor must be at least 2 (or use -i)", o.step_factor);
  }
  if (a.check != 0 && a.check != 1) return Status::InvalidArgument("-c {}: expected 0 or 1", a.check);
  o.check = a.check == 1;
  if (o.iters < 1) return Status::InvalidArgument("-n {}: need at least one timed iteration", o.iters);
  if (o.warmup < 0) return Status::InvalidArgument("-w {}: must not be negative", o.warmup);
  if (o.root < -1) return Status::InvalidArgument("-r {}: expected a rank, or -1 for every rank in turn", o.root);
  if (a.dtype == "all") {
    for (size_t t = 0; t < coll::kNumDataTypes; ++t) o.dtypes.push_back(static_cast<DataType>(t));
  } else {
    auto t = coll::parse_dtype(a.dtype);
    if (!t.ok()) return Status::InvalidArgument("-d: {}; or all", t.status().message());
    o.dtypes = {*t};
  }
  if (a.op == "all") {
    for (size_t r = 0; r < coll::kNumReduceOps; ++r) o.ops.push_back(static_cast<ReduceOp>(r));
  } else {
    auto op = coll::parse_reduce_op(a.op);
    if (!op.ok()) return Status::InvalidArgument("-o: {}; or all", op.status().message());
    o.ops = {*op};
  }
  if (!a.link_rate.empty()) {
    PODNET_ASSIGN_OR_RETURN(o.link_gbps, parse_link_rate(a.link_rate));
  }
  if (!o.plot.empty() && o.plot.find('\'') != std::string::npos)
    return Status::InvalidArgument("--plot '{}': the file name must not contain a quote", o.plot);
  return {};
}

// ---- the table --------------------------------------------------------------------------

std::string time_text(double us) {
  return us >= 10000 ? fmt::format("{:.0f}", us) : us >= 100 ? fmt::format("{:.1f}", us) : fmt::format("{:.2f}", us);
}

std::string root_text(const CollCase& c) { return std::to_string(c.root); }
std::string type_text(const CollCase& c) {
  return c.coll == Collective::kBarrier ? "none" : std::string(dtype_name(c.type));
}
std::string op_text(const CollCase& c) { return is_reducing(c.coll) ? std::string(reduce_op_name(c.op)) : "none"; }

std::string factor_text(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "2(n-1)/n";
    case Collective::kBroadcast:
    case Collective::kReduce: return "1";
    case Collective::kBarrier: return "0 (no payload)";
    default: return "(n-1)/n";
  }
}

void print_header(const CollOptions& o, const CollBench& b, const std::string& what, int nranks) {
  fmt::print("# podnet bench coll: {} on {} ranks, transport {}\n", what, nranks, b.transport());
  fmt::print("# minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} validation: {}\n", o.min_bytes,
             o.max_bytes, o.step_bytes > 0 ? fmt::format("{}(bytes)", o.step_bytes) : fmt::format("{}(factor)", o.step_factor),
             o.warmup, o.iters, o.check ? 1 : 0);
  if (o.alloc) fmt::print("# buffers from Context::allocate_memory (--alloc)\n");
  fmt::print("#\n# Using ranks\n");
  for (size_t r = 0; r < b.rank_lines().size(); ++r) fmt::print("#  Rank {:>2} {}\n", r, b.rank_lines()[r]);
  std::fflush(stdout);
}

void print_table_header(const CollOptions& o, Collective c, int nranks, const std::string& algo_note) {
  fmt::print("#\n# {}: busbw = algbw * {} = {:.4g}{}\n", collective_name(c), factor_text(c), busbw_factor(c, nranks),
             algo_note);
  const std::string link = o.link_gbps > 0 ? fmt::format("  {:>6}  {:>6}", "link%", "link%") : "";
  fmt::print("#{:51}{:^32}{:^32}\n", "", "out-of-place", "in-place");
  std::string place = fmt::format("  {:>7}  {:>6}  {:>6} {:>6}", "time", "algbw", "busbw", "#wrong");
  fmt::print("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>18}  {:>9}{}\n", "size", "count", "type", "redop", "root",
             place, place, "algorithm", "transport", link);
  place = fmt::format("  {:>7}  {:>6}  {:>6} {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  fmt::print("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>18}  {:>9}{}\n", "(B)", "(elements)", "", "", "", place,
             place, "", "", o.link_gbps > 0 ? fmt::format("  {:>6}  {:>6}", "(oop)", "(ip)") : "");
}

double link_percent(const CollOptions& o, double busbw) { return busbw * 8 / o.link_gbps * 100; }

void print_row(const CollOptions& o, const CollRow& r, const std::string& transport) {
  auto place = [&](const PlaceResult& p) {
    return fmt::format("  {:>7}  {:>6.2f}  {:>6.2f}  {:>5}", time_text(p.time_us), p.algbw, p.busbw,
                       o.check ? std::to_string(p.wrong) : "N/A");
  };
  std::string link;
  if (o.link_gbps > 0)
    link = fmt::format("  {:>6.1f}  {:>6.1f}", link_percent(o, r.out_of_place.busbw), link_percent(o, r.in_place.busbw));
  fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>18}  {:>9}{}\n", r.size, r.count, type_text(r.c),
             op_text(r.c), root_text(r.c), place(r.out_of_place), place(r.in_place), r.algorithm(), transport, link);
  std::fflush(stdout);
}

struct Totals {
  uint64_t wrong = 0;
  double busbw_sum = 0;
  int busbw_count = 0;
  double avg_busbw() const { return busbw_count > 0 ? busbw_sum / busbw_count : 0; }
};

nlohmann::json place_json(const CollOptions& o, const PlaceResult& p) {
  nlohmann::json j{{"time_us", p.time_us}, {"algbw", p.algbw}, {"busbw", p.busbw}, {"wrong", p.wrong},
                   {"algorithm", p.algorithm}};
  if (o.link_gbps > 0) j["busbw_link_fraction"] = p.busbw * 8 / o.link_gbps;
  return j;
}

nlohmann::json report_json(const CollOptions& o, const CollBench& b, int nranks, const std::vector<CollRow>& rows,
                           const Totals& t, const std::map<Collective, std::string>& forced) {
  nlohmann::json j;
  j["benchmark"] = "coll";
  j["nranks"] = nranks;
  j["transport"] = b.transport();
  j["units"] = {{"size", "bytes"}, {"time", "us"}, {"algbw", "GB/s"}, {"busbw", "GB/s"}};
  j["min_bytes"] = o.min_bytes;
  j["max_bytes"] = o.max_bytes;
  if (o.step_bytes > 0) j["step_bytes"] = o.step_bytes;
  else j["step_factor"] = o.step_factor;
  j["warmup"] = o.warmup;
  j["iters"] = o.iters;
  j["check"] = o.check;
  j["alloc"] = o.alloc;
  j["ranks"] = b.rank_lines();
  if (o.link_gbps > 0) j["link_gbps"] = o.link_gbps;
  if (!forced.empty()) {
    j["algorithm_forced"] = nlohmann::json::object();
    for (auto& [c, a] : forced) j["algorithm_forced"][std::string(collective_name(c))] = a;
  }
  j["results"] = nlohmann::json::array();
  for (const CollRow& r : rows) {
    j["results"].push_back({{"collective", collective_name(r.c.coll)},
                            {"size", r.size},
                            {"count", r.count},
                            {"type", type_text(r.c)},
                            {"redop", op_text(r.c)},
                            {"root", r.c.root},
                            {"busbw_factor", busbw_factor(r.c.coll, nranks)},
                            {"algorithm", r.out_of_place.algorithm},  // each place says its own
                            {"transport", b.transport()},
                            {"out_of_place", place_json(o, r.out_of_place)},
                            {"in_place", place_json(o, r.in_place)},
                            {"wrong", r.out_of_place.wrong + r.in_place.wrong}});
  }
  j["wrong"] = t.wrong;
  j["avg_busbw"] = t.avg_busbw();
  if (o.min_busbw >= 0) j["min_busbw"] = o.min_busbw;
  return j;
}

// ---- the plot -----------------------------------------------------------------------------

bool gnuplot_in_path() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (::access(((dir.empty() ? "." : dir) + "/gnuplot").c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Why --plot cannot work here, or empty. Checked before the benchmark, not after it.
std::string plot_problem(const std::string& file) {
  if (!gnuplot_in_path())
    return "--plot needs gnuplot, which is not in PATH (Debian: apt-get install gnuplot-nox); no plot written";
  size_t slash = file.rfind('/');
  std::string dir = slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
  if (::access(dir.c_str(), W_OK) != 0)
    return fmt::format("--plot {}: cannot write to directory {}: {}", file, dir, std::strerror(errno));
  return "";
}

// busbw against size, one line per collective/type/op/root; out of place solid, in place dashed.
Status write_plot(const CollOptions& o, const std::vector<CollRow>& rows, int nranks, const std::string& transport) {
  std::vector<std::pair<std::string, std::vector<const CollRow*>>> series;
  for (const CollRow& r : rows) {
    if (r.c.coll == Collective::kBarrier || r.size == 0) continue;  // nothing to put on a log axis
    std::string name = fmt::format("{} {}", collective_name(r.c.coll), type_text(r.c));
    if (is_reducing(r.c.coll)) name += " " + op_text(r.c);
    if (is_rooted(r.c.coll)) name += fmt::format(" root {}", r.c.root);
    if (series.empty() || series.back().first != name) series.emplace_back(name, std::vector<const CollRow*>{});
    series.back().second.push_back(&r);
  }
  if (series.empty()) return Status::InvalidArgument("--plot: no row with a payload to plot");
  std::remove(o.plot.c_str());
  FILE* gp = ::popen("gnuplot", "w");
  if (gp == nullptr) return Status::Unavailable("--plot: cannot start gnuplot: {}", std::strerror(errno));
  fmt::print(gp, "set terminal pngcairo size 1200,700 noenhanced\nset output '{}'\n", o.plot);
  fmt::print(gp, "set title 'podnet bench coll: bus bandwidth, {} ranks, {}'\n", nranks, transport);
  fmt::print(gp, "set logscale x 2\nset format x '%.0b%BB'\nset xlabel 'size (bytes)'\nset ylabel 'busbw (GB/s)'\n");
  fmt::print(gp, "set grid\nset key outside right top\nset yrange [0:*]\n");
  if (o.link_gbps > 0)
    fmt::print(gp, "set arrow from graph 0, first {0} to graph 1, first {0} nohead dt 3 lc 'black'\n"
                   "set label 'link {1} Gbit/s' at graph 0.01, first {0} offset 0,0.6\n",
               o.link_gbps / 8, o.link_gbps);
  std::string cmd = "plot ";
  for (size_t s = 0; s < series.size(); ++s) {
    cmd += fmt::format("{}'-' using 1:2 with linespoints lc {} dt 1 pt 7 title '{} out-of-place', "
                       "'-' using 1:2 with linespoints lc {} dt 2 pt 6 title '{} in-place'",
                       s == 0 ? "" : ", ", s + 1, series[s].first, s + 1, series[s].first);
  }
  fmt::print(gp, "{}\n", cmd);
  for (auto& [name, pts] : series) {
    for (const CollRow* r : pts) fmt::print(gp, "{} {}\n", r->size, r->out_of_place.busbw);
    fmt::print(gp, "e\n");
    for (const CollRow* r : pts) fmt::print(gp, "{} {}\n", r->size, r->in_place.busbw);
    fmt::print(gp, "e\n");
  }
  int st = ::pclose(gp);
  // gnuplot exits 0 on some errors; the file itself is the proof.
  unsigned char magic[8] = {};
  FILE* f = std::fopen(o.plot.c_str(), "rb");
  size_t got = f != nullptr ? std::fread(magic, 1, sizeof magic, f) : 0;
  if (f != nullptr) std::fclose(f);
  if (st != 0 || got != 8 || std::memcmp(magic, "\x89PNG\r\n\x1a\n", 8) != 0)
    return Status::Internal("--plot: gnuplot (exit status {}) did not write a PNG to {}", st, o.plot);
  return {};
}

// ---- the run ----------------------------------------------------------------------------

int run_bench_coll(const Args& args, CollOptions o) {
  auto fail = [](int code, const Status& st) {
    std::fprintf(stderr, "podnet bench coll: %s\n", st.message().c_str());
    return code;
  };
  if (Status st = parse_args(args, o); !st.ok()) return fail(kExitUsage, st);
  auto world = World::create();
  if (!world.ok()) return fail(kExitError, world.status());
  auto comm = Communicator::create(**world);
  if (!comm.ok()) return fail(kExitError, comm.status());
  Communicator& cm = **comm;
  const int me = cm.rank(), nranks = cm.size();
  // Every rank sees the same arguments, so these refusals agree without talking.
  if (o.root >= nranks)
    return me == 0 ? fail(kExitUsage, Status::InvalidArgument("-r {}: there are only {} ranks", o.root, nranks))
                   : kExitUsage;
  std::map<Collective, std::string> forced;
  std::vector<std::string> refused;
  if (!o.algorithm.empty()) {
    for (Collective c : o.collectives) {
      Status st = cm.set_algorithm(c, o.algorithm);
      if (st.ok()) forced[c] = o.algorithm;
      else refused.push_back(st.message());
    }
    if (forced.empty()) {
      std::string why = refused.front();
      if (refused.size() > 1) {
        why = "no selected collective has an algorithm of that name";
        for (const std::string& r : refused) why += "; " + r;
      }
      if (me == 0) fail(kExitUsage, Status::InvalidArgument("-a {}: {}", o.algorithm, why));
      return kExitUsage;
    }
  }
  if (!o.plot.empty()) {
    // Rank 0 draws; it decides for everyone so that all ranks stop together.
    uint8_t ok = 1;
    std::string why = me == 0 ? plot_problem(o.plot) : "";
    if (!why.empty()) ok = 0;
    if (Status st = cm.broadcast(&ok, 1, DataType::kUint8, 0); !st.ok()) return fail(kExitError, st);
    if (!ok) return me == 0 ? fail(kExitError, Status::Unavailable("{}", why)) : kExitError;
  }
  auto bench = CollBench::create(**world, cm, o);
  if (!bench.ok()) return fail(kExitError, bench.status().with_context("rank {}", me));
  CollBench& b = **bench;
  const bool print = me == 0 && !o.json;
  if (print) print_header(o, b, args.collective, nranks);

  std::vector<CollRow> rows;
  Totals t;
  for (Collective c : o.collectives) {
    if (print) {
      std::string note;
      if (!o.algorithm.empty())
        note = forced.count(c) ? fmt::format(" (algorithm forced: {})", o.algorithm)
                               : fmt::format(" (no algorithm '{}': the tuner chooses)", o.algorithm);
      print_table_header(o, c, nranks, note);
    }
    for (const CollCase& cc : cases_for(c, o, nranks)) {
      auto row = b.measure(cc);
      if (!row.ok()) return fail(kExitError, row.status().with_context("rank {}", me));
      if (print) print_row(o, *row, b.transport());
      t.wrong += row->out_of_place.wrong + row->in_place.wrong;
      if (c != Collective::kBarrier) {
        t.busbw_sum += row->out_of_place.busbw + row->in_place.busbw;
        t.busbw_count += 2;
      }
      rows.push_back(std::move(*row));
    }
  }

  // Every rank has the same totals (reduced per row), so every rank exits with the same code.
  const bool slow = o.min_busbw >= 0 && t.avg_busbw() < o.min_busbw;
  if (me == 0) {
    if (o.json) {
      auto j = report_json(o, b, nranks, rows, t, forced);
      j["ok"] = t.wrong == 0 && !slow;
      std::cout << j.dump(2) << std::endl;
    } else {
      fmt::print("#\n");
      if (o.check) fmt::print("# Out of bounds values : {} {}\n", t.wrong, t.wrong == 0 ? "OK" : "FAILED");
      else fmt::print("# Out of bounds values : N/A (not checked: -c 0)\n");
      fmt::print("# Avg bus bandwidth    : {:g} \n", t.avg_busbw());
      if (o.link_gbps > 0)
        fmt::print("# Link rate            : {:g} Gbit/s ({:g} GB/s); avg busbw is {:.1f}% of it\n", o.link_gbps,
                   o.link_gbps / 8, link_percent(o, t.avg_busbw()));
      if (o.min_busbw >= 0)
        fmt::print("# Min bus bandwidth    : {:g} (--min-busbw) {}\n", o.min_busbw, slow ? "FAILED" : "OK");
      fmt::print("#\n");
      std::fflush(stdout);
    }
    if (t.wrong > 0) std::fprintf(stderr, "podnet bench coll: %llu wrong elements\n", static_cast<unsigned long long>(t.wrong));
    if (slow)
      std::fprintf(stderr, "podnet bench coll: average bus bandwidth %g GB/s is below --min-busbw %g GB/s\n",
                   t.avg_busbw(), o.min_busbw);
  }
  int code = t.wrong > 0 ? kExitWrong : slow ? kExitSlow : 0;
  if (me == 0 && !o.plot.empty()) {
    Status st = write_plot(o, rows, nranks, b.transport());
    if (!st.ok()) {
      fail(kExitError, st);
      if (code == 0) code = kExitError;
    } else if (!o.json) {
      fmt::print("# Plot                 : {}\n", o.plot);
    }
  }
  return code;
}

}  // namespace

void add_bench_coll_command(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  auto o = std::make_shared<CollOptions>();
  CLI::App* p = bench.add_subcommand("coll", "collective benchmarks that read like nccl-tests (all_reduce_perf ...)");
  p->footer(kFooter);
  p->add_option("collective", a->collective, "allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, "
                                              "gather, scatter, barrier, or all")
      ->required();
  p->add_option("-b,--minbytes", a->min_bytes, "smallest size in bytes (K/M/G suffixes: binary)")->capture_default_str();
  p->add_option("-e,--maxbytes", a->max_bytes, "largest size in bytes")->capture_default_str();
  a->factor_opt = p->add_option("-f,--stepfactor", o->step_factor, "multiply the size by this from -b to -e")
                      ->capture_default_str();
  a->step_opt = p->add_option("-i,--stepbytes", a->step_bytes, "add this many bytes instead (instead of -f)");
  p->add_option("-w,--warmup_iters", o->warmup, "untimed calls per size and place")->capture_default_str();
  p->add_option("-n,--iters", o->iters, "timed calls per size and place")->capture_default_str();
  p->add_option("-c,--check", a->check, "1: check every row's result against a reference (one extra call); 0: don't")
      ->capture_default_str();
  p->add_option("-d,--datatype", a->dtype,
                "int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double, or all")
      ->capture_default_str();
  p->add_option("-o,--op", a->op, "reduction of allreduce, reduce, reduce_scatter: sum, prod, min, max, avg, or all")
      ->capture_default_str();
  p->add_option("-r,--root", o->root, "root rank of broadcast, reduce, gather, scatter; -1: every rank in turn")
      ->capture_default_str();
  p->add_option("-a,--algorithm", o->algorithm,
                "force this algorithm (ring, recursive_doubling, rabenseifner, tree, one_shot, bruck, chain, "
                "pairwise, recursive_halving, ...) on every collective that has it; default: the tuner");
  p->add_option("--min-busbw", o->min_busbw, "fail (exit 4) when the average bus bandwidth is below this, GB/s")
      ->type_name("GB/s");
  p->add_option("--link-rate", a->link_rate, "the link's rate in bits/s (25G, 100Gbps, 400G): adds busbw as % of it")
      ->type_name("RATE");
  p->add_flag("--json", o->json, "print one JSON report instead of the table");
  p->add_flag("--alloc", o->alloc,
              "take both buffers from Context::allocate_memory (peers on this host map them: docs/io-api.md)");
  p->add_option("--plot", o->plot, "write busbw against size to this PNG (needs gnuplot: Debian gnuplot-nox)")
      ->type_name("FILE.png");
  p->callback([a, o] { set_exit_code(run_bench_coll(*a, *o)); });
}

}  // namespace podnet::tool
