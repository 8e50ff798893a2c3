// Point-to-point transfers between real ranks started through `podnet run` (PODNET_BIN): the
// benchmark's own payload check for every operation and an awkward range of sizes, then a
// peer killed (SIGKILL) or frozen (SIGSTOP) under the rank program PODNET_XFER_RANK
// (xfer_rank.cc), whose survivor must fail fast with an error that names the peer, and last
// the same benchmark under Open MPI's mpirun.
//
// Every process is bounded twice: `podnet run --timeout` stops the ranks, and run_program()
// SIGKILLs the launcher past its own limit (the ranks die with it: PR_SET_PDEATHSIG). All
// traffic stays on 127.0.0.1 (podnet run sets PODNET_IFNAME=lo).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <functional>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

extern char** environ;

namespace {

using namespace podnet::testing;

pid_t rank_pid(const std::string& text, int rank) {
  auto line = rank_line(text, rank, "pid ");
  return line ? static_cast<pid_t>(std::stol(line->substr(4))) : 0;
}

bool alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

// ---- the benchmark's payload check, every operation ------------------------------------

// What a 2-rank job on this host uses: shm unless PODNET_TRANSPORT says otherwise (the .tcp
// variant of this suite) or the run's own environment forces it.
std::string expected_transport(const std::vector<std::string>& run_env) {
  for (const auto& e : run_env)
    if (e.rfind("PODNET_TRANSPORT=", 0) == 0) return e.substr(17);
  std::string t = env_or("PODNET_TRANSPORT", "auto");
  return t == "auto" ? "shm" : t;
}

struct BenchRun {
  std::vector<std::string> env;
  Outcome outcome;
  nlohmann::json json;  // rank 0's report; null when it printed none
};

BenchRun bench(const std::string& op, const std::string& mode, uint64_t size, int iters, int warmup,
               const std::vector<std::string>& env = {}, const std::vector<std::string>& extra = {}) {
  BenchRun b;
  b.env = env;
  std::vector<std::string> args{"run", "-n", "2", "--timeout", "50"};
  for (const auto& e : env) {
    args.push_back("--env");
    args.push_back(e);
  }
  for (const std::string& a : {std::string("--"), podnet_bin(), std::string("bench"), std::string("p2p"),
                               std::string("-o"), op, std::string("-m"), mode, std::string("-s"),
                               std::to_string(size), std::string("-n"), std::to_string(iters), std::string("-w"),
                               std::to_string(warmup), std::string("--check"), std::string("--json")})
    args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  b.outcome = run_program(podnet_bin(), args);
  std::string text;
  for (const std::string& line : rank_lines(b.outcome.out, 0)) text += line + "\n";
  b.json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (b.json.is_discarded()) b.json = nullptr;
  return b;
}

// Checks what every report must say: the run as asked for, and no wrong payload.
void expect_report(const BenchRun& b, const std::string& op, const std::string& mode, uint64_t size, int iters) {
  ASSERT_EQ(b.outcome.exit_code, 0) << describe(b.outcome);
  ASSERT_TRUE(b.json.is_object()) << "rank 0 printed no JSON report\n" << describe(b.outcome);
  const nlohmann::json& j = b.json;
  EXPECT_EQ(j.value("benchmark", ""), "p2p");
  EXPECT_EQ(j.value("op", ""), op);
  EXPECT_EQ(j.value("mode", ""), mode);
  EXPECT_EQ(j.value("check", false), true);
  EXPECT_EQ(j.value("transport", ""), expected_transport(b.env));
  ASSERT_TRUE(j.contains("results") && j["results"].is_array() && j["results"].size() == 1) << j.dump(2);
  const nlohmann::json& r = j["results"][0];
  EXPECT_EQ(r.value("bytes", uint64_t{~0ull}), size) << r.dump();
  EXPECT_EQ(r.value("iterations", -1), iters) << r.dump();
  EXPECT_EQ(r.value("wrong", -1), 0) << r.dump();
  EXPECT_GT(r.value("seconds", 0.0), 0.0) << r.dump();
}

class BenchP2pBandwidth : public ::testing::TestWithParam<std::tuple<std::string, uint64_t>> {};

TEST_P(BenchP2pBandwidth, EveryPayloadArrivesIntact) {
  const auto& [op, size] = GetParam();
  // 64 MiB with --check costs ~100 ms an iteration on a small host (~300 ms under ASan);
  // keep each run short: 8 iterations are still several batches of checked slots.
  const int iters = size >= (64u << 20) ? 8 : 200;
  const int warmup = size >= (64u << 20) ? 1 : 10;
  BenchRun b = bench(op, "bw", size, iters, warmup);
  expect_report(b, op, "bw", size, iters);
  if (HasFatalFailure() || size == 0) return;
  const nlohmann::json& r = b.json["results"][0];
  EXPECT_GT(r.value("bw_gbytes_per_s", 0.0), 0.0) << r.dump();
  EXPECT_GT(r.value("msg_rate_mpps", 0.0), 0.0) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Sizes, BenchP2pBandwidth,
                         ::testing::Combine(::testing::Values("write", "read", "send", "write_notify"),
                                            ::testing::Values(0, 1, 3, 4095, 4096, (1u << 20) + 7, 64u << 20)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param));
                         });

// --alloc: buffers from Context::allocate_memory (over shm, one-sided write and read go
// through a mapping of the peer's memory once learned): every operation, every payload intact.
class BenchP2pAlloc : public ::testing::TestWithParam<std::tuple<std::string, uint64_t>> {};

TEST_P(BenchP2pAlloc, EveryPayloadArrivesIntact) {
  const auto& [op, size] = GetParam();
  // Fewer rounds of 1 MiB: each is a shared copy that needs both ranks' CPUs, and under
  // ThreadSanitizer, with another such test beside it, 200 write ping-pongs of 1 MiB took
  // longer than the run's 50 s limit.
  const int iters = size >= (1u << 20) ? 50 : 200;
  BenchRun b = bench(op, "bw", size, iters, 10, {"PODNET_LOG=info"}, {"--alloc"});
  expect_report(b, op, "bw", size, iters);
  if (HasFatalFailure()) return;
  EXPECT_EQ(b.json.value("alloc", false), true) << b.json.dump();
  // Over shm the peer's buffer is mapped by the operations that can use it: write and read,
  // and sends and write_notify past the eager size (the receiver, or the target, copies out
  // of the sender's or initiator's memory).
  const bool maps = expected_transport(b.env) == "shm" && env_or("PODNET_SHM_CMA", "1") != "0" &&
                    (op == "write" || op == "read" || size > (32u << 10));
  EXPECT_EQ(b.outcome.err.find("mapped the region of key") != std::string::npos, maps) << describe(b.outcome);
  BenchRun l = bench(op, "lat", size, iters, 10, {}, {"--alloc"});
  expect_report(l, op, "lat", size, iters);
}

// PODNET_SHM_MAP=0: allocated memory takes the ring and cross-memory paths like any other.
TEST(BenchP2pAllocNoMap, TheKnobKeepsAllocatedMemoryOffTheMappedPath) {
  for (const char* op : {"write", "send"}) {
    BenchRun b = bench(op, "bw", 100000, 100, 5, {"PODNET_LOG=info", "PODNET_SHM_MAP=0"}, {"--alloc"});
    expect_report(b, op, "bw", 100000, 100);
    EXPECT_EQ(b.outcome.err.find("mapped the region of key"), std::string::npos) << describe(b.outcome);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BenchP2pAlloc,
                         ::testing::Combine(::testing::Values("write", "read", "send", "write_notify"),
                                            ::testing::Values(1, 4095, 100000, (1u << 20) + 7)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param));
                         });

// MSG_ZEROCOPY (off by default) keeps buffers and the frame headers pinned until the kernel
// reports completion: every operation must still deliver every payload intact.
class BenchP2pZerocopy : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchP2pZerocopy, EveryPayloadArrivesIntact) {
  const std::string& op = GetParam();
  for (uint64_t size : {uint64_t{4096}, uint64_t{(1u << 20) + 7}}) {
    BenchRun b = bench(op, "bw", size, 100, 5,
                       {"PODNET_TRANSPORT=tcp", "PODNET_TCP_ZEROCOPY=on", "PODNET_TCP_ZEROCOPY_MIN=4K"});
    expect_report(b, op, "bw", size, 100);
  }
}

// --echo: the send ping-pong's target replies with the payload it received; the report says
// which kind of reply was timed (with --check, which verifies the echo, always the echo).
TEST(BenchP2pEcho, TheReportSaysWhichReplyWasTimed) {
  for (uint64_t size : {uint64_t{8}, uint64_t{65536}}) {
    BenchRun b = bench("send", "lat", size, 200, 10, {}, {"--echo"});
    expect_report(b, "send", "lat", size, 200);
    EXPECT_EQ(b.json.value("echo", false), true) << b.json.dump();
  }
  std::vector<std::string> args{"run",   "-n",  "2",   "--timeout", "50", "--",    podnet_bin(),
                                "bench", "p2p", "-o",  "send",      "-m", "lat",   "-s",
                                "65536", "-n",  "200", "-w",        "10", "--json"};
  Outcome o = run_program(podnet_bin(), args);
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::string text;
  for (const std::string& line : rank_lines(o.out, 0)) text += line + "\n";
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << describe(o);
  EXPECT_EQ(j.value("echo", true), false) << j.dump();
}

INSTANTIATE_TEST_SUITE_P(Ops, BenchP2pZerocopy, ::testing::Values("write", "read", "send", "write_notify"));

class BenchP2pLatency : public ::testing::TestWithParam<std::string> {};

// A latency run is short (~25 ms) and its first iterations race with the target's setup, so
// each op runs a few times: a race there shows up as a wrong payload in one of them.
TEST_P(BenchP2pLatency, EightBytesPingPong) {
  const std::string op = GetParam();
  for (int run = 0; run < 5; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1) + " of 5");
    BenchRun b = bench(op, "lat", 8, 1000, 100);
    expect_report(b, op, "lat", 8, 1000);
    if (HasFailure()) return;
    bool pingpong = op != "read";  // write: a ping-pong through memory, as ib_write_lat
    EXPECT_EQ(b.json.value("latency_kind", ""), pingpong ? "rtt/2" : "rtt");
    const nlohmann::json& r = b.json["results"][0];
    double t_min = r.value("t_min_us", 0.0), t_typ = r.value("t_typical_us", 0.0);
    EXPECT_GT(t_min, 0.0) << r.dump();
    EXPECT_LE(t_min, t_typ) << r.dump();
    EXPECT_LE(t_typ, r.value("t_p99_us", 0.0)) << r.dump();
    EXPECT_LE(r.value("t_p99_us", 0.0), r.value("t_max_us", 0.0)) << r.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BenchP2pLatency, ::testing::Values("send", "write_notify", "write", "read"),
                         [](const auto& p) { return p.param; });

// Each iteration is timed with the CPU's counter where the kernel keeps time with it (as
// perftest and ucx_perftest time theirs), which the report names; PODNET_BENCH_TIMER=fenced
// orders each read, =clock forces clock_gettime, and a value it does not know is refused
// with the variable's name.
TEST(BenchP2pLatencyTimer, IsNamedAndSelectable) {
  std::string cs;
  std::getline(std::ifstream("/sys/devices/system/clocksource/clocksource0/current_clocksource"), cs);
  std::string expect_auto = "clock_gettime";
#if defined(__x86_64__) || defined(__i386__)
  if (cs == "tsc") expect_auto = "tsc";
#elif defined(__aarch64__)
  if (cs == "arch_sys_counter") expect_auto = "cntvct";
#endif
  BenchRun a = bench("send", "lat", 8, 2000, 100);
  expect_report(a, "send", "lat", 8, 2000);
  EXPECT_EQ(a.json.value("timer", ""), expect_auto) << "clocksource " << cs;
  BenchRun c = bench("send", "lat", 8, 2000, 100, {"PODNET_BENCH_TIMER=clock"});
  expect_report(c, "send", "lat", 8, 2000);
  EXPECT_EQ(c.json.value("timer", ""), "clock_gettime");
  BenchRun f = bench("send", "lat", 8, 2000, 100, {"PODNET_BENCH_TIMER=fenced"});
  expect_report(f, "send", "lat", 8, 2000);
  EXPECT_EQ(f.json.value("timer", ""), expect_auto == "tsc" ? "tsc+lfence" : expect_auto);
  BenchRun pairs = bench("send", "lat", 8, 200, 10, {}, {"--all-pairs"});  // the matrix names it too
  ASSERT_EQ(pairs.outcome.exit_code, 0) << describe(pairs.outcome);
  EXPECT_EQ(pairs.json.value("benchmark", ""), "p2p_all_pairs");
  EXPECT_EQ(pairs.json.value("timer", ""), expect_auto);
  BenchRun bad = bench("send", "lat", 8, 100, 10, {"PODNET_BENCH_TIMER=cycles"});
  EXPECT_NE(bad.outcome.exit_code, 0) << describe(bad.outcome);
  EXPECT_NE(bad.outcome.err.find("PODNET_BENCH_TIMER='cycles'"), std::string::npos) << describe(bad.outcome);
}

// The write ping-pong watches the payload's last byte; a write striped over several tcp
// connections may place it before the rest. --check still finds every payload whole (it
// waits for the rest), and the run neither hangs nor reports a wrong payload.
TEST(BenchP2pWriteLatency, StripedPayloadsAreCheckedWhole) {
  BenchRun b = bench("write", "lat", (1u << 20) + 7, 30, 3, {"PODNET_TRANSPORT=tcp", "PODNET_TCP_STREAMS=4"});
  expect_report(b, "write", "lat", (1u << 20) + 7, 30);
  EXPECT_EQ(b.json.value("latency_kind", ""), "rtt/2");
}

// --hugepages (as perftest's --use_hugepages): the buffers are on 2 MiB transparent huge
// pages, which the report shows per row (the kernel's count for the initiator's buffer), and
// every payload still arrives intact; where THP is off the run refuses with the reason.
TEST(BenchP2pHugepages, BuffersAreOnHugePagesAndPayloadsArriveIntact) {
  std::ifstream thp_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string thp;
  std::getline(thp_file, thp);
  const bool off = thp.empty() || thp.find("[never]") != std::string::npos;
  for (const std::string op : {"write", "send"}) {
    SCOPED_TRACE(op);
    BenchRun b = bench(op, "bw", (4u << 20) + 7, 20, 2, {}, {"--hugepages"});
    if (off) {
      EXPECT_NE(b.outcome.exit_code, 0) << describe(b.outcome);
      EXPECT_NE(b.outcome.err.find("transparent huge pages are off"), std::string::npos) << describe(b.outcome);
      continue;
    }
    expect_report(b, op, "bw", (4u << 20) + 7, 20);
    if (HasFatalFailure()) return;
    EXPECT_EQ(b.json.value("hugepages", false), true);
    // The buffer holds two 4 MiB slots at least: some 2 MiB pages unless memory is too
    // fragmented for the kernel to find one (then the run says 0, which this host never did).
    EXPECT_GE(b.json["results"][0].value("hugepage_bytes", uint64_t{0}), uint64_t{2} << 20) << b.json.dump();
  }
  BenchRun plain = bench("write", "bw", 4096, 20, 2);
  ASSERT_EQ(plain.outcome.exit_code, 0) << describe(plain.outcome);
  EXPECT_EQ(plain.json.value("hugepages", true), false);
  EXPECT_FALSE(plain.json["results"][0].contains("hugepage_bytes"));
}

// ---- message order ---------------------------------------------------------------------

// xfer.h promises that notifications are matched in the order the sender posted them. Many
// write_notify in flight at once: small ones (one frame each), striped ones whose chunks cover
// every stream (default settings), and striped ones with fewer chunks than streams.
struct OrderCase {
  const char* name;
  int bytes, count;
  std::vector<std::string> env;
};

void PrintTo(const OrderCase& c, std::ostream* os) { *os << c.name; }

class P2pOrdering : public ::testing::TestWithParam<OrderCase> {};

TEST_P(P2pOrdering, WriteNotifyImmediatesArriveInPostOrder) {
  const OrderCase& c = GetParam();
  std::vector<std::string> args{"run", "-n", "2", "--timeout", "30"};
  for (const std::string& e : c.env) {
    args.push_back("--env");
    args.push_back(e);
  }
  for (std::string a : {xfer_rank_bin(), std::string("notify-order"), std::to_string(c.count), std::to_string(c.bytes)})
    args.push_back(a);
  Outcome o = run_program(podnet_bin(), args);
  auto verdict = rank_line(o.out, 1, "notification");
  ASSERT_TRUE(verdict) << "rank 1 gave no verdict\n" << describe(o);
  EXPECT_EQ(*verdict, "notifications in order") << describe(o);
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, P2pOrdering,
    ::testing::Values(OrderCase{"one_frame_8_bytes", 8, 256, {}}, OrderCase{"one_frame_4096_bytes", 4096, 256, {}},
                      OrderCase{"striped_1MiB", 1 << 20, 32, {}},
                      OrderCase{"striped_256KiB_8_streams", 256 << 10, 128, {"PODNET_TCP_STREAMS=8"}}),
    [](const auto& p) { return std::string(p.param.name); });

// Over tcp a ping-pong travels on one connection both ways, so that TCP acknowledges each
// message in the reply instead of in a segment of its own (docs/performance.md). Each rank
// reads TCP_INFO of its own sockets: the one that sent the messages must have received the
// answers too. Runs over tcp whatever the variant (the shm transport has no TCP sockets).
TEST(P2pTcpConnections, PingPongSharesOneConnectionBothWays) {
  const int count = 2000;
  Outcome o = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "60", "--env", "PODNET_TRANSPORT=tcp",
                                         xfer_rank_bin(), "ping-pong-sockets", std::to_string(count)});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  for (int r = 0; r < 2; ++r) {
    auto line = rank_line(o.out, r, "rank " + std::to_string(r) + ":");
    ASSERT_TRUE(line) << "rank " << r << " gave no verdict\n" << describe(o);
    EXPECT_EQ(*line, "rank " + std::to_string(r) + ": 1 sockets sent " + std::to_string(count) +
                         " data segments or more, 1 of them received as many")
        << describe(o);
  }
}

// PODNET_TCP_CONGESTION, read back from the kernel (TCP_CONGESTION of the sockets that
// carried a ping-pong over 127.0.0.1): auto sets reno through the loopback device, system
// keeps net.ipv4.tcp_congestion_control, a name is set as given; a bad value fails the run.
std::string read_sysctl(const char* path) {
  std::ifstream in(path);
  std::string v;
  std::getline(in, v);
  return v;
}

TEST(P2pTcpConnections, CongestionControlFollowsTheKnob) {
  const std::string system_cc = read_sysctl("/proc/sys/net/ipv4/tcp_congestion_control");
  ASSERT_FALSE(system_cc.empty()) << "no /proc/sys/net/ipv4/tcp_congestion_control";
  const std::string available = " " + read_sysctl("/proc/sys/net/ipv4/tcp_available_congestion_control") + " ";
  std::vector<std::pair<std::string, std::string>> cases{{"auto", "reno"}, {"system", system_cc}};
  // A second name besides the default, where the kernel has one (reno is always built in).
  for (const char* other : {"cubic", "reno"})
    if (other != system_cc && available.find(std::string(" ") + other + " ") != std::string::npos) {
      cases.emplace_back(other, other);
      break;
    }
  for (const auto& [knob, want] : cases) {
    Outcome o = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "60", "--env", "PODNET_TRANSPORT=tcp", "--env",
                                           "PODNET_TCP_CONGESTION=" + knob, xfer_rank_bin(), "ping-pong-sockets", "200"});
    ASSERT_EQ(o.exit_code, 0) << knob << "\n" << describe(o);
    for (int r = 0; r < 2; ++r) {
      auto line = rank_line(o.out, r, "rank " + std::to_string(r) + " congestion:");
      ASSERT_TRUE(line) << knob << ": rank " << r << " named no congestion control\n" << describe(o);
      EXPECT_EQ(*line, "rank " + std::to_string(r) + " congestion: " + want) << "PODNET_TCP_CONGESTION=" << knob;
    }
  }
  Outcome bad = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "60", "--env", "PODNET_TRANSPORT=tcp", "--env",
                                           "PODNET_TCP_CONGESTION=a-name-longer-than-fifteen", xfer_rank_bin(),
                                           "ping-pong-sockets", "10"});
  EXPECT_NE(bad.exit_code, 0) << describe(bad);
  EXPECT_NE((bad.out + bad.err).find("PODNET_TCP_CONGESTION='a-name-longer-than-fifteen'"), std::string::npos)
      << describe(bad);
}

// ---- a peer that dies or freezes -----------------------------------------------------

// Drives one `podnet run -n 2 -- podnet_xfer_rank MODE ...` job: once rank 1 is ready (and,
// for `stream`, rank 0's first write is done), waits `delay_s`, sends `signo` to rank 1, and
// notes when rank 0's verdict line (starting with `verdict`) arrives. Rank 1 is SIGKILLed
// once the verdict is in (or the launcher's own stop fails), so that nothing outlives the test.
struct FaultRun {
  Outcome outcome;
  pid_t pid0 = 0, pid1 = 0;
  double t_signal = -1;   // seconds after start when rank 1 got `signo`
  double t_verdict = -1;  // seconds after start when rank 0's verdict arrived
  std::string verdict;
  double detect_s() const { return t_verdict - t_signal; }
};

FaultRun fault_run(const std::vector<std::string>& rank_args, const std::vector<std::string>& env, int signo,
                   double delay_s, const std::string& verdict) {
  FaultRun f;
  std::vector<std::string> args{"run", "-n", "2", "--timeout", "40", "--grace-ms", "10000"};
  for (const std::string& e : env) {
    args.push_back("--env");
    args.push_back(e);
  }
  args.push_back("--");
  args.push_back(xfer_rank_bin());
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  const bool stream = rank_args.at(0) == "stream";
  double t_ready = -1;
  bool rank1_killed = signo == SIGKILL;  // already dead: its pid may be reused
  auto on_tick = [&](pid_t, const Outcome& o, double t) {
    if (f.pid0 == 0) f.pid0 = rank_pid(o.out, 0);
    if (f.pid1 == 0) f.pid1 = rank_pid(o.out, 1);
    if (t_ready < 0 && f.pid1 != 0 && rank_line(o.out, 1, "ready") &&
        (!stream || rank_line(o.out, 0, "first write done")))
      t_ready = t;
    if (t_ready >= 0 && f.t_signal < 0 && t - t_ready >= delay_s) {
      kill(f.pid1, signo);
      f.t_signal = t;
    }
    if (f.t_verdict < 0) {
      if (auto line = rank_line(o.out, 0, verdict)) {
        f.t_verdict = t;
        f.verdict = *line;
      }
    }
    // A frozen rank 1 would keep the launcher waiting until --timeout: end it once rank 0
    // has spoken (or gave up), and a SIGCONT lets a stopped one take the SIGKILL at once.
    if (f.t_signal >= 0 && !rank1_killed && (f.t_verdict >= 0 || t - f.t_signal > 15)) {
      kill(f.pid1, SIGKILL);
      kill(f.pid1, SIGCONT);
      rank1_killed = true;
    }
  };
  f.outcome = run_program(podnet_bin(), args, {}, on_tick, 60);
  if (f.t_verdict >= 0 && f.t_signal >= 0)
    std::printf("rank 0 reported %.3f s after rank 1 got signal %d: %s\n", f.detect_s(), signo, f.verdict.c_str());
  // The launcher has reaped both ranks; make sure, and never leave one behind.
  for (pid_t pid : {f.pid0, f.pid1}) {
    if (alive(pid)) {
      ADD_FAILURE() << "rank pid " << pid << " outlived the launcher; killing it";
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
    }
  }
  return f;
}

std::string describe(const FaultRun& f) {
  return "signal at " + std::to_string(f.t_signal) + " s, verdict at " + std::to_string(f.t_verdict) + " s: " +
         f.verdict + "\n" + describe(f.outcome);
}

std::set<std::string> dev_shm_names() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) names.insert(e.path().string());
  return names;
}

// A stream whose rank 1 was SIGKILLed: rank 0 reported it within `within_s`, naming rank 1.
void expect_killed_peer_reported(const FaultRun& f, double within_s) {
  ASSERT_GT(f.pid1, 0) << "rank 1 never printed its pid\n" << describe(f);
  ASSERT_GE(f.t_signal, 0) << "the transfer never got going\n" << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0 never reported the dead peer\n" << describe(f);
  EXPECT_LT(f.detect_s(), within_s) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("rank 1"), std::string::npos) << describe(f);
  EXPECT_NE(f.outcome.err.find("rank 1 (pid " + std::to_string(f.pid1) + ")"), std::string::npos) << describe(f);
  EXPECT_NE(f.outcome.err.find("killed by signal SIGKILL"), std::string::npos) << describe(f);
  EXPECT_EQ(f.outcome.exit_code, 128 + SIGKILL) << describe(f);
  // Rank 0 judged its own error as expected (exit 0), so the launcher names only rank 1.
  EXPECT_EQ(f.outcome.err.find("rank 0 (pid"), std::string::npos) << describe(f);
}

TEST(P2pPeerFailure, KilledPeerFailsTheWriterFast) {
  const auto shm_before = dev_shm_names();
  FaultRun f = fault_run({"stream", "4194304"}, {"PODNET_PEER_TIMEOUT_MS=3000"}, SIGKILL, 0.3, "rank 0 error after");
  // shm segments are memfds: a killed rank leaves nothing behind.
  EXPECT_EQ(dev_shm_names(), shm_before) << describe(f);
  expect_killed_peer_reported(f, 10);
}

// Over shm a write into memory the peer allocated is a memcpy into a mapping that outlives
// the peer: the writer must still learn of its death, not go on copying into orphan pages.
TEST(P2pPeerFailure, KilledPeerFailsAMappedWriterFast) {
  FaultRun f =
      fault_run({"stream-alloc", "4194304"}, {"PODNET_PEER_TIMEOUT_MS=3000"}, SIGKILL, 0.3, "rank 0 error after");
  // The copies ask the peer's pidfd once a millisecond: milliseconds here. (Relying on the
  // progress thread to see the hang-up while the writer kept its CPU took 2.5-3 s, with
  // every write of those seconds reported done.)
  expect_killed_peer_reported(f, 1.0);
}

TEST(P2pPeerFailure, FrozenPeerFailsTheWriterAfterThePeerTimeout) {
  FaultRun f = fault_run({"stream", "4194304"}, {"PODNET_PEER_TIMEOUT_MS=3000", "PODNET_HEARTBEAT_MS=500"}, SIGSTOP,
                         0.3, "rank 0 error after");
  ASSERT_GE(f.t_signal, 0) << "the transfer never got going\n" << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0 never reported the frozen peer\n" << describe(f);
  EXPECT_LT(f.detect_s(), 3 + 5) << describe(f);
  // Not before the peer timeout: the peer is silent, not gone. Silence counts from the last
  // frame received, which on a connection that carries only heartbeats came up to one
  // heartbeat period before the SIGSTOP.
  EXPECT_GT(f.detect_s(), 3.0 - 0.5 - 0.2) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("rank 1"), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("no data or heartbeat"), std::string::npos) << describe(f);
  EXPECT_EQ(f.outcome.err.find("rank 0 (pid"), std::string::npos) << "rank 0 should exit 0\n" << describe(f);
}

// An idle endpoint lives on heartbeats: a recv that nothing satisfies runs into its own
// deadline (kTimeout) even at three peer timeouts, it is not mistaken for a dead peer.
TEST(P2pPeerFailure, IdleHealthyPeerIsNotDeclaredFailed) {
  Outcome o = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "30", "--env",
                                         "PODNET_PEER_TIMEOUT_MS=1000", "--env", "PODNET_HEARTBEAT_MS=200", "--",
                                         xfer_rank_bin(), "recv-wait", "3000"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  auto line = rank_line(o.out, 0, "rank 0 recv ended after ");
  ASSERT_TRUE(line) << describe(o);
  EXPECT_NE(line->find(": timeout: "), std::string::npos) << *line;
  long ms = std::stol(line->substr(std::strlen("rank 0 recv ended after ")));
  EXPECT_GE(ms, 2900) << *line;
  EXPECT_LT(ms, 6000) << *line;
}

TEST(P2pPeerFailure, KilledPeerFailsAPendingRecv) {
  FaultRun f = fault_run({"recv-wait", "60000"}, {"PODNET_PEER_TIMEOUT_MS=3000"}, SIGKILL, 0.3,
                         "rank 0 recv ended after");
  ASSERT_GE(f.t_signal, 0) << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0's recv never failed\n" << describe(f);
  EXPECT_LT(f.detect_s(), 10) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("rank 1"), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("recv"), std::string::npos) << "the error should name the operation\n" << describe(f);
  EXPECT_EQ(f.outcome.exit_code, 128 + SIGKILL) << describe(f);
}

TEST(P2pPeerFailure, FrozenPeerFailsAPendingRecv) {
  FaultRun f = fault_run({"recv-wait", "60000"}, {"PODNET_PEER_TIMEOUT_MS=3000", "PODNET_HEARTBEAT_MS=500"}, SIGSTOP,
                         0.3, "rank 0 recv ended after");
  ASSERT_GE(f.t_signal, 0) << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0's recv never failed\n" << describe(f);
  EXPECT_LT(f.detect_s(), 3 + 5) << describe(f);
  EXPECT_GT(f.detect_s(), 3.0 - 0.5 - 0.2) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("no data or heartbeat"), std::string::npos) << describe(f);
}

// A collective whose peer dies or freezes: on one host the allreduce runs through the
// shared-memory arena (over tcp in the .tcp variant), and the survivor must still name rank 1.
TEST(P2pPeerFailure, KilledPeerFailsAnAllreduceLoop) {
  const auto shm_before = dev_shm_names();
  FaultRun f = fault_run({"allreduce-loop"}, {"PODNET_PEER_TIMEOUT_MS=3000"}, SIGKILL, 0.3, "rank 0 error after");
  EXPECT_EQ(dev_shm_names(), shm_before) << describe(f);
  ASSERT_GE(f.t_signal, 0) << "the allreduces never got going\n" << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0 never reported the dead peer\n" << describe(f);
  EXPECT_LT(f.detect_s(), 10) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("rank 1"), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("allreduce"), std::string::npos) << "the error should name the operation\n" << describe(f);
  const bool shm = env_or("PODNET_TRANSPORT", "auto") != "tcp";
  if (shm) {
    EXPECT_NE(f.outcome.out.find("algorithm shm"), std::string::npos) << describe(f);
  }
}

TEST(P2pPeerFailure, FrozenPeerFailsAnAllreduceLoop) {
  FaultRun f = fault_run({"allreduce-loop"}, {"PODNET_PEER_TIMEOUT_MS=3000", "PODNET_HEARTBEAT_MS=500"}, SIGSTOP, 0.3,
                         "rank 0 error after");
  ASSERT_GE(f.t_signal, 0) << describe(f);
  ASSERT_GE(f.t_verdict, 0) << "rank 0 never reported the frozen peer\n" << describe(f);
  EXPECT_LT(f.detect_s(), 3 + 5) << describe(f);
  EXPECT_GT(f.detect_s(), 3.0 - 0.5 - 0.2) << describe(f);
  EXPECT_NE(f.verdict.find("peer-failed: "), std::string::npos) << describe(f);
  EXPECT_NE(f.verdict.find("rank 1"), std::string::npos) << describe(f);
}

// ---- Open MPI's mpirun -----------------------------------------------------------------

bool in_path(const std::string& name) {
  std::istringstream dirs(env_or("PATH", ""));
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

// Ranks started by mpirun find rank and size in OMPI_COMM_WORLD_*, and rank 0 hosts the store
// on 127.0.0.1 at a port derived from the job id.
TEST(P2pMpirun, BenchUnderMpirun) {
  if (!in_path("mpirun")) GTEST_SKIP() << "mpirun not in PATH (Debian: apt-get install openmpi-bin)";
  // Open MPI refuses root without both the flag and the variables; its own traffic (out of
  // band and btl) is kept on loopback as well.
  Outcome o = run_program("timeout", {"-k", "5", "60", "mpirun", "-n", "2", "--allow-run-as-root", "--oversubscribe",
                                      "--mca", "btl", "self,tcp", "-x", "PODNET_IFNAME=lo", podnet_bin(), "bench",
                                      "p2p", "-o", "write", "-s", "65536", "-n", "100", "--check", "--json"},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                           "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_oob_tcp_if_include=lo"},
                          {}, 70);
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  nlohmann::json j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no JSON report from rank 0\n" << describe(o);
  EXPECT_EQ(j.value("op", ""), "write");
  ASSERT_TRUE(j.contains("results") && j["results"].size() == 1) << j.dump(2);
  EXPECT_EQ(j["results"][0].value("iterations", -1), 100) << j.dump(2);
  EXPECT_EQ(j["results"][0].value("bytes", 0), 65536) << j.dump(2);
  EXPECT_EQ(j["results"][0].value("wrong", -1), 0) << j.dump(2);
}

}  // namespace
