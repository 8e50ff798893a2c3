// `podnet bench coll` between real ranks started through `podnet run` (PODNET_BIN): every
// collective's own result check on three ranks (an odd count, so that no algorithm gets the
// easy power-of-two case), nccl-tests' size, count and bus-bandwidth conventions recomputed
// here from the JSON report, the table's footer, and the exit codes of a run below
// --min-busbw and of a bad argument.
//
// Every process is bounded twice: `podnet run --timeout` stops the ranks, and run_program()
// SIGKILLs the launcher past its own limit. All traffic stays on 127.0.0.1.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"

namespace {

using namespace podnet::testing;

// `podnet run -n N -- podnet bench coll ARGS...`
Outcome bench(int nranks, const std::vector<std::string>& args) {
  std::vector<std::string> all{"run", "-n", std::to_string(nranks), "--timeout", "50", "--", podnet_bin(), "bench",
                               "coll"};
  all.insert(all.end(), args.begin(), args.end());
  return run_program(podnet_bin(), all);
}

// What rank 0 wrote, without the launcher's "[0] " prefix.
std::string rank0_text(const std::string& out) {
  std::string text;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("[0] ", 0) == 0) text += line.substr(4) + "\n";
  return text;
}

// nccl-tests' conventions, written out independently of the tool.
double bus_factor(const std::string& coll, int n) {
  if (coll == "allreduce") return 2.0 * (n - 1) / n;
  if (coll == "broadcast" || coll == "reduce") return 1;
  if (coll == "barrier") return 0;
  return static_cast<double>(n - 1) / n;  // allgather, reduce_scatter, alltoall, gather, scatter
}

// Size printed for `bytes` asked: count = bytes / 4 (float); block collectives round to the ranks.
uint64_t expected_size(const std::string& coll, uint64_t bytes, int n) {
  uint64_t count = bytes / 4;
  if (coll == "allreduce" || coll == "broadcast" || coll == "reduce") return count * 4;
  return count / n * n * 4;
}

uint64_t expected_count(const std::string& coll, uint64_t bytes, int n) {
  uint64_t count = bytes / 4;
  if (coll == "allreduce" || coll == "broadcast" || coll == "reduce") return count;
  return count / n;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

TEST(BenchColl, EveryCollectiveChecksOutAndFollowsNcclTestsConventions) {
  const int n = 3;
  Outcome o = bench(n, {"all", "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--json"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  nlohmann::json j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
  ASSERT_TRUE(j.is_object()) << "rank 0 printed no JSON report\n" << describe(o);
  EXPECT_EQ(j.value("benchmark", ""), "coll");
  EXPECT_EQ(j.value("nranks", 0), n);
  EXPECT_EQ(j.value("check", false), true);
  EXPECT_EQ(j.value("wrong", -1), 0);
  EXPECT_EQ(j.value("ok", false), true);
  ASSERT_TRUE(j.contains("results") && j["results"].is_array()) << j.dump(2);

  const std::vector<uint64_t> sweep{8, 64, 512, 4096, 32768};  // 8 .. 64K by 8
  std::map<std::string, std::vector<uint64_t>> sizes;
  double busbw_sum = 0;
  int busbw_count = 0;
  for (const nlohmann::json& r : j["results"]) {
    const std::string coll = r.value("collective", "?");
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r.value("wrong", -1), 0);
    EXPECT_DOUBLE_EQ(r.value("busbw_factor", -1.0), bus_factor(coll, n));
    sizes[coll].push_back(r.value("size", uint64_t{0}));
    for (const char* place : {"out_of_place", "in_place"}) {
      const nlohmann::json& p = r[place];
      EXPECT_EQ(p.value("wrong", -1), 0) << place;
      const double time_us = p.value("time_us", 0.0), algbw = p.value("algbw", -1.0), busbw = p.value("busbw", -1.0);
      EXPECT_GT(time_us, 0.0) << place;
      EXPECT_TRUE(near(algbw, static_cast<double>(r.value("size", 0)) / 1e3 / time_us)) << place;  // GB/s
      EXPECT_TRUE(near(busbw, algbw * bus_factor(coll, n))) << place;
      if (coll != "barrier") {
        busbw_sum += busbw;
        ++busbw_count;
      }
    }
    if (coll == "barrier") continue;
    EXPECT_EQ(r.value("type", ""), "float");
    const bool reducing = coll == "allreduce" || coll == "reduce" || coll == "reduce_scatter";
    EXPECT_EQ(r.value("redop", ""), reducing ? "sum" : "none");
    const bool rooted = coll == "broadcast" || coll == "reduce" || coll == "gather" || coll == "scatter";
    EXPECT_EQ(r.value("root", -2), rooted ? 0 : -1);
    EXPECT_FALSE(r.value("algorithm", "").empty());
    EXPECT_EQ(r.value("algorithm", ""), r["out_of_place"].value("algorithm", "?"));
    EXPECT_FALSE(r["in_place"].value("algorithm", "").empty());
    EXPECT_EQ(r.value("transport", ""), "shm");  // ranks of one host
  }
  ASSERT_GT(busbw_count, 0);
  EXPECT_TRUE(near(j.value("avg_busbw", -1.0), busbw_sum / busbw_count));

  const std::set<std::string> expected{"allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast",
                                       "reduce",    "gather",    "scatter",        "barrier"};
  std::set<std::string> seen;
  for (auto& [coll, v] : sizes) seen.insert(coll);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(sizes["barrier"].size(), 1u);
  for (auto& [coll, v] : sizes) {
    if (coll == "barrier") continue;
    SCOPED_TRACE(coll);
    ASSERT_EQ(v.size(), sweep.size());
    for (size_t i = 0; i < sweep.size(); ++i) EXPECT_EQ(v[i], expected_size(coll, sweep[i], n)) << sweep[i];
  }
  for (const nlohmann::json& r : j["results"]) {
    const std::string coll = r.value("collective", "?");
    if (coll == "barrier") continue;
    uint64_t asked = 0;
    for (uint64_t s : sweep)
      if (expected_size(coll, s, n) == r.value("size", uint64_t{1})) asked = s;
    EXPECT_EQ(r.value("count", uint64_t{0}), expected_count(coll, asked, n)) << r.dump();
  }
}

// Four ranks as two "hosts" (PODNET_HOST_ID per pair): shm inside a pair, tcp across, in one
// job; every collective must still check out.
TEST(BenchColl, MixedShmAndTcpPeersInOneJob) {
  Outcome o = run_program(
      podnet_bin(), {"run", "-n", "4", "--timeout", "50", "--", "sh", "-c",
                     "PODNET_HOST_ID=host$((PODNET_RANK / 2)) exec \"$0\" bench coll all -b 8 -e 1M -f 16 -c 1 --json",
                     podnet_bin()});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
  ASSERT_TRUE(j.is_object()) << describe(o);
  EXPECT_EQ(j.value("transport", ""), "shm+tcp") << j.dump();
  EXPECT_EQ(j.value("wrong", -1), 0);
  ASSERT_TRUE(j.contains("results") && !j["results"].empty()) << j.dump();
  std::set<std::string> colls;
  for (const auto& r : j["results"]) {
    colls.insert(r.value("collective", "?"));
    EXPECT_EQ(r.value("transport", ""), "shm+tcp") << r.dump();
    EXPECT_EQ(r.value("wrong", -1), 0) << r.dump();
  }
  EXPECT_EQ(colls.size(), 9u);
}

// A row whose places ran different algorithms says so: on two ranks whose arena prefers
// hand-overs, an in-place alltoall past the arena's crossover runs in the arena's parts where
// out of place it copies directly ("cma").
TEST(BenchColl, EachPlaceNamesTheAlgorithmThatRanIt) {
  for (bool json : {true, false}) {
    std::vector<std::string> args{"run", "-n",        "2", "--timeout", "50", "--env", "PODNET_SHM_PREFER=arena",
                                  "--",  podnet_bin()};
    for (const char* a : {"bench", "coll", "alltoall", "-b", "2M", "-e", "2M", "-n", "3", "-w", "1", "-c", "1"})
      args.emplace_back(a);
    if (json) args.push_back("--json");
    Outcome o = run_program(podnet_bin(), args);
    ASSERT_EQ(o.exit_code, 0) << describe(o);
    if (!json) {
      EXPECT_NE(o.out.find(" cma/shm "), std::string::npos) << describe(o);  // the table's column
      continue;
    }
    auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << describe(o);
    ASSERT_EQ(j["results"].size(), 1u) << j.dump();
    const auto& r = j["results"][0];
    EXPECT_EQ(r.value("wrong", -1), 0) << r.dump();
    EXPECT_EQ(r["out_of_place"].value("algorithm", ""), "cma") << r.dump();
    EXPECT_EQ(r["in_place"].value("algorithm", ""), "shm") << r.dump();
    EXPECT_EQ(r.value("algorithm", ""), "cma") << r.dump();
  }
}

// Algorithm "cma" between real processes: the ranks read each other's buffers with
// process_vm_readv. With PODNET_SHM_CMA=0 the communicator does not offer it, and forcing it
// runs the tuner's choice with a warning that says why.
TEST(BenchColl, DirectReadsBetweenProcessesAndTheirFallback) {
  for (bool allowed : {true, false}) {
    const std::string env = allowed ? "" : "PODNET_SHM_CMA=0 ";
    Outcome o = run_program(podnet_bin(), {"run", "-n", "3", "--timeout", "50", "--", "sh", "-c",
                                           env + "exec \"$0\" bench coll all -a cma -b 8 -e 1M -f 8 -c 1 --json",
                                           podnet_bin()});
    ASSERT_EQ(o.exit_code, 0) << describe(o);
    auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << describe(o);
    EXPECT_EQ(j.value("wrong", -1), 0) << j.dump();
    int rows = 0;
    for (const auto& r : j["results"]) {
      const std::string coll = r.value("collective", "?");
      if (coll != "allgather" && coll != "alltoall") continue;
      ++rows;
      EXPECT_EQ(r.value("wrong", -1), 0) << r.dump();
      if (allowed)
        EXPECT_EQ(r.value("algorithm", ""), "cma") << r.dump();
      else
        EXPECT_NE(r.value("algorithm", ""), "cma") << r.dump();
    }
    EXPECT_EQ(rows, 2 * 6);  // 8 B .. 256 KiB by 8: six sizes each
    const bool warned = (o.out + o.err).find("algorithm cma forced, but not every rank may read") != std::string::npos;
    EXPECT_EQ(warned, !allowed) << describe(o);
  }
}

// --alloc: both buffers from Context::allocate_memory. Every collective checks out over
// shm (where the arena's direct copies go through the peers' mappings: with PODNET_LOG=info
// each rank logs the regions it mapped) and over tcp (ordinary memory there); the header and
// the JSON say so.
TEST(BenchColl, AllocatedBuffersCheckOutOnEveryTransport) {
  for (std::string transport : {"shm", "tcp"}) {
    std::vector<std::string> args{"run", "-n", "3", "--timeout", "50", "--env", "PODNET_TRANSPORT=" + transport,
                                  "--env", "PODNET_LOG=info", "--env", "PODNET_LOG_SUBSYS=net", "--",
                                  podnet_bin(), "bench", "coll", "all", "-b", "8", "-e", "1M", "-f", "32",
                                  "-n", "3", "-w", "2", "-c", "1", "--json", "--alloc"};
    // Over shm the arena's direct copies (allgather, alltoall, allreduce; the others run
    // the tuner's choice with a warning).
    if (transport == "shm") args.insert(args.end(), {"-a", "cma"});
    Outcome o = run_program(podnet_bin(), args);
    ASSERT_EQ(o.exit_code, 0) << transport << "\n" << describe(o);
    auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << describe(o);
    EXPECT_EQ(j.value("wrong", -1), 0) << j.dump();
    EXPECT_EQ(j.value("alloc", false), true) << j.dump();
    EXPECT_GE(j["results"].size(), 10u) << j.dump();
    const bool mapped = (o.out + o.err).find("mapped the region of key") != std::string::npos;
    EXPECT_EQ(mapped, transport == "shm") << transport << "\n" << describe(o);
  }
  Outcome table = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "50", "--", podnet_bin(), "bench", "coll",
                                             "allgather", "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", "--alloc"});
  ASSERT_EQ(table.exit_code, 0) << describe(table);
  EXPECT_NE(table.out.find("# buffers from Context::allocate_memory (--alloc)"), std::string::npos) << describe(table);
}

// PODNET_SHM_PREFER between processes: the probe's verdict (logged by rank 0) decides the
// algorithm of a 2-rank allgather of 16 KiB blocks, inside the arena's own crossover and past
// the one for cheap cross-memory copies; the forced settings decide it without a probe; a
// bad value fails the run with a message that names the variable.
TEST(BenchColl, ShmPreferDecidesTheTwoRankCrossovers) {
  for (std::string prefer : {"probe", "arena", "cma"}) {
    Outcome o = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "50", "--env", "PODNET_TRANSPORT=shm",
                                           "--env", "PODNET_SHM_PREFER=" + prefer, "--env", "PODNET_LOG=info",
                                           "--env", "PODNET_LOG_SUBSYS=coll", "--", podnet_bin(), "bench", "coll",
                                           "allgather", "-b", "32K", "-e", "32K", "-n", "5", "-w", "1", "--json"});
    ASSERT_EQ(o.exit_code, 0) << prefer << "\n" << describe(o);
    auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << describe(o);
    ASSERT_EQ(j["results"].size(), 1u) << j.dump();
    EXPECT_EQ(j.value("wrong", -1), 0) << j.dump();
    const std::string algo = j["results"][0].value("algorithm", "");
    const std::string all = o.out + o.err;
    const bool probed = all.find("arena probe, 65536 bytes: hand-over ") != std::string::npos;
    EXPECT_EQ(probed, prefer == "probe") << describe(o);
    std::string want = prefer == "cma" ? "cma" : "shm";
    if (prefer == "probe") want = all.find("cross-memory copies are cheaper") != std::string::npos ? "cma" : "shm";
    EXPECT_EQ(algo, want) << prefer << "\n" << describe(o);
  }
  Outcome bad = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "50", "--env", "PODNET_SHM_PREFER=fast",
                                           "--", podnet_bin(), "bench", "coll", "allreduce", "-b", "8", "-e", "8"});
  EXPECT_NE(bad.exit_code, 0) << describe(bad);
  EXPECT_NE((bad.out + bad.err).find("PODNET_SHM_PREFER='fast': expected probe, arena or cma"), std::string::npos)
      << describe(bad);
}

TEST(BenchColl, TablePrintsNcclTestsColumnsAndFooter) {
  Outcome o = bench(2, {"allreduce", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "--link-rate", "25G"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  const std::string t = rank0_text(o.out);
  for (const char* s : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "out-of-place",
                        "in-place", "algorithm", "transport", "link%", "# Out of bounds values : 0 OK",
                        "# Avg bus bandwidth    : ", "# Link rate            : 25 Gbit/s"})
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "'\n" << t;
  // One row per size, each starting with the size and its count.
  for (const char* row : {"           8             2     float     sum      -1",
                          "         512           128     float     sum      -1"})
    EXPECT_NE(t.find(row), std::string::npos) << "missing row '" << row << "'\n" << t;
  EXPECT_EQ(o.out.find("[1] "), std::string::npos) << "only rank 0 prints\n" << o.out;
}

TEST(BenchColl, BelowMinBusbwFails) {
  Outcome o = bench(2, {"allreduce", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "0", "--min-busbw", "1e9"});
  EXPECT_NE(o.exit_code, 0) << describe(o);
  EXPECT_EQ(o.exit_code, 4) << describe(o);
  EXPECT_NE(o.err.find("is below --min-busbw"), std::string::npos) << describe(o);
  EXPECT_NE(o.out.find("(--min-busbw) FAILED"), std::string::npos) << describe(o);
}

TEST(BenchColl, BadDataTypeIsAUsageError) {
  Outcome o = bench(2, {"allreduce", "-d", "floatt"});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_NE(o.err.find("podnet bench coll: -d: unknown data type 'floatt'"), std::string::npos) << describe(o);
}

bool gnuplot_in_path() {
  std::istringstream dirs(getenv("PATH") != nullptr ? getenv("PATH") : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  return false;
}

TEST(BenchColl, PlotWritesAPng) {
  if (!gnuplot_in_path()) GTEST_SKIP() << "gnuplot not in PATH (Debian: apt-get install gnuplot-nox)";
  char dir[] = "/tmp/podnet_bench_coll_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr) << strerror(errno);
  const std::string png = std::string(dir) + "/busbw.png";
  Outcome o = bench(2, {"allgather", "-b", "64", "-e", "4K", "-f", "4", "-n", "2", "-w", "0", "--plot", png});
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  unsigned char magic[8] = {};
  FILE* f = fopen(png.c_str(), "rb");
  ASSERT_NE(f, nullptr) << png << ": " << strerror(errno) << "\n" << describe(o);
  EXPECT_EQ(fread(magic, 1, 8, f), 8u);
  fclose(f);
  EXPECT_EQ(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0);
  unlink(png.c_str());
  rmdir(dir);
}

}  // namespace
