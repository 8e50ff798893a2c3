// `podnet lab` and `podnet run --lab` end to end, with real namespaces, bridges, veth pairs
// and tbf: a lab comes up as planned and goes away without a trace (also after a crash), a
// second `up` is refused, link and rate changes show in `status`, p2p and every collective
// run across four lab hosts, and two rails carry traffic together.
//
// Needs root and `ip`/`tc` (iproute2); skipped with the reason otherwise. Every test uses a lab
// name of its own ("gt<pid>-<n>") and removes it in TearDown, pass or fail. All traffic goes
// to addresses inside the test's own namespaces.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "process.h"

namespace {

using namespace podnet::testing;
using nlohmann::json;

Outcome podnet(const std::vector<std::string>& args, double limit_s = 60) {
  return run_program(podnet_bin(), args, {}, {}, limit_s);
}

// Names of the interfaces of the root namespace.
std::set<std::string> root_interfaces() {
  Outcome o = run_program("ip", {"-j", "link", "show"});
  std::set<std::string> names;
  json j = json::parse(o.out, nullptr, false);
  if (j.is_array())
    for (const json& l : j) names.insert(l.value("ifname", ""));
  return names;
}

std::set<std::string> namespaces_with_prefix(const std::string& prefix) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
    if (e.path().filename().string().starts_with(prefix)) out.insert(e.path().filename().string());
  return out;
}

class LabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "podnet lab needs root (network namespaces); running as uid " << geteuid();
    if (run_program("ip", {"-V"}).exit_code != 0 || run_program("tc", {"-V"}).exit_code != 0)
      GTEST_SKIP() << "ip or tc not found (Debian package iproute2)";
    static int counter = 0;
    name_ = "gt" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  }
  void TearDown() override {
    if (name_.empty()) return;
    for (const std::string& ns : own_namespaces_) run_program("ip", {"netns", "del", ns});
    Outcome o = podnet({"lab", "down", "--name", name_});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    EXPECT_TRUE(namespaces_with_prefix("podnet-" + name_ + "-").empty());
  }

  // Brings the lab up; skips the test when the kernel refuses namespaces (a container
  // without CAP_SYS_ADMIN), fails on any other error.
  void up(int hosts, int rails, const std::string& rate = "1gbit") {
    Outcome o = podnet({"lab", "up", "--name", name_, "--hosts", std::to_string(hosts), "--rails",
                        std::to_string(rails), "--rate", rate});
    if (o.exit_code != 0 && o.err.find("Operation not permitted") != std::string::npos)
      GTEST_SKIP() << "the kernel refused to create namespaces: " << o.err;
    ASSERT_EQ(o.exit_code, 0) << describe(o);
  }
  json status() {
    Outcome o = podnet({"lab", "status", "--name", name_, "--json"});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    json j = json::parse(o.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << o.out;
    return j;
  }
  const json& link(const json& s, int host, int rail) { return s["host_list"][host]["links"][rail]; }
  std::string ns(int host) const { return "podnet-" + name_ + "-h" + std::to_string(host); }

  std::string name_;
  std::vector<std::string> own_namespaces_;  // made by the test itself, deleted in TearDown
};

TEST_F(LabTest, UpStatusDownLeavesNothingBehind) {
  const std::set<std::string> root_before = root_interfaces();
  up(3, 2, "250mbit");
  if (IsSkipped()) return;
  // Nothing in the root namespace, everything in the lab's own.
  EXPECT_EQ(root_interfaces(), root_before);
  EXPECT_EQ(namespaces_with_prefix("podnet-" + name_ + "-"),
            (std::set<std::string>{"podnet-" + name_ + "-sw", ns(0), ns(1), ns(2)}));
  EXPECT_TRUE(std::filesystem::exists("/run/podnet-lab/" + name_ + ".json"));

  json s = status();
  EXPECT_EQ(s.value("state", ""), "up");
  ASSERT_EQ(s["host_list"].size(), 3u);
  for (int h = 0; h < 3; ++h) {
    ASSERT_EQ(s["host_list"][h]["links"].size(), 2u);
    for (int r = 0; r < 2; ++r) {
      const json& l = link(s, h, r);
      EXPECT_EQ(l.value("address", ""), "10.199." + std::to_string(r) + "." + std::to_string(h + 1) + "/24");
      EXPECT_EQ(l.value("interface", ""), "eth" + std::to_string(r));
      EXPECT_EQ(l.value("state", ""), "up");
      EXPECT_EQ(l.value("rate_out_bps", 0ull), 250'000'000ull);
      EXPECT_EQ(l.value("rate_in_bps", 0ull), 250'000'000ull);
      EXPECT_EQ(l.value("mtu", 0), 1500);
    }
  }
  // The text form and exec work on the same lab.
  Outcome text = podnet({"lab", "status", "--name", name_});
  EXPECT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_NE(text.out.find("10.199.1.3/24"), std::string::npos) << text.out;
  Outcome ex = podnet({"lab", "exec", "--name", name_, "h2", "--", "sh", "-c", "hostname; ip -o -4 addr show; exit 7"});
  EXPECT_EQ(ex.exit_code, 7) << describe(ex);
  EXPECT_NE(ex.out.find(ns(2)), std::string::npos) << ex.out;
  EXPECT_NE(ex.out.find("10.199.1.3/24"), std::string::npos) << ex.out;

  Outcome down = podnet({"lab", "down", "--name", name_});
  EXPECT_EQ(down.exit_code, 0) << describe(down);
  EXPECT_TRUE(namespaces_with_prefix("podnet-" + name_ + "-").empty());
  EXPECT_FALSE(std::filesystem::exists("/run/podnet-lab/" + name_ + ".json"));
  EXPECT_EQ(root_interfaces(), root_before);
  // A second down has nothing to do and says so.
  Outcome again = podnet({"lab", "down", "--name", name_});
  EXPECT_EQ(again.exit_code, 0) << describe(again);
  EXPECT_NE(again.out.find("nothing to remove"), std::string::npos) << again.out;
}

TEST_F(LabTest, UpTwiceRefusesAndKeepsTheFirst) {
  up(2, 1);
  if (IsSkipped()) return;
  Outcome o = podnet({"lab", "up", "--name", name_, "--hosts", "4"});
  EXPECT_EQ(o.exit_code, 3) << describe(o);
  EXPECT_NE(o.err.find("already exists"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("podnet lab down --name " + name_), std::string::npos) << o.err;
  json s = status();  // the first lab is untouched
  EXPECT_EQ(s.value("hosts", 0), 2);
  EXPECT_EQ(s["host_list"].size(), 2u);
}

TEST_F(LabTest, LinkAndRateChangesShowInStatus) {
  up(2, 2);
  if (IsSkipped()) return;
  Outcome o = podnet({"lab", "link", "--name", name_, "h1", "0", "down"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  json s = status();
  EXPECT_EQ(link(s, 1, 0).value("state", ""), "down");
  EXPECT_FALSE(link(s, 1, 0).value("port_up", true));
  EXPECT_FALSE(link(s, 1, 0).value("carrier", true));
  EXPECT_EQ(link(s, 1, 1).value("state", ""), "up");
  EXPECT_EQ(link(s, 0, 0).value("state", ""), "up");
  o = podnet({"lab", "link", "--name", name_, "h1", "0", "up"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(link(status(), 1, 0).value("state", ""), "up");

  o = podnet({"lab", "rate", "--name", name_, "h0", "all", "250mbit"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  s = status();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(link(s, 0, r).value("rate_out_bps", 0ull), 250'000'000ull);
    EXPECT_EQ(link(s, 0, r).value("rate_in_bps", 0ull), 250'000'000ull);
    EXPECT_EQ(link(s, 1, r).value("rate_out_bps", 0ull), 1'000'000'000ull);
  }
  // Bad values are refused with the reason, and change nothing.
  o = podnet({"lab", "rate", "--name", name_, "h0", "0", "fast"});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_NE(o.err.find("rate 'fast'"), std::string::npos) << o.err;
  o = podnet({"lab", "link", "--name", name_, "h7", "0", "down"});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_NE(o.err.find("h0 .. h1"), std::string::npos) << o.err;
}

TEST_F(LabTest, DownCleansUpAfterACrashAndLeavesForeignNamespacesAlone) {
  up(2, 1);
  if (IsSkipped()) return;
  // A crash: the state file is gone, the namespaces are not.
  std::filesystem::remove("/run/podnet-lab/" + name_ + ".json");
  // A namespace that fits the names but is not the lab's: no marker, an interface inside.
  const std::string foreign = "podnet-" + name_ + "-h9";
  ASSERT_EQ(run_program("ip", {"netns", "add", foreign}).exit_code, 0);
  own_namespaces_.push_back(foreign);
  ASSERT_EQ(run_program("ip", {"-n", foreign, "link", "add", "name", "keep0", "type", "veth", "peer", "name", "keep1"})
                .exit_code,
            0);

  Outcome o = podnet({"lab", "up", "--name", name_, "--hosts", "2"});  // leftovers: refused
  EXPECT_EQ(o.exit_code, 3) << describe(o);
  EXPECT_NE(o.err.find("podnet lab down"), std::string::npos) << o.err;

  o = podnet({"lab", "down", "--name", name_});
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_NE(o.err.find(foreign), std::string::npos) << "the foreign namespace is named in a warning: " << o.err;
  EXPECT_EQ(namespaces_with_prefix("podnet-" + name_ + "-"), (std::set<std::string>{foreign}));
}

TEST_F(LabTest, P2pAndEveryCollectiveAcrossFourHosts) {
  up(4, 1);
  if (IsSkipped()) return;
  json before = status();
  // Every ordered pair, payloads checked.
  Outcome o = podnet({"run", "--lab", name_, "-n", "4", "--timeout", "50", "--", podnet_bin(), "bench", "p2p",
                      "--all-pairs", "-s", "256K", "-n", "8", "--check", "--json"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::string text;
  for (const std::string& l : rank_lines(o.out, 0)) text += l + "\n";
  json m = json::parse(text, nullptr, false);
  ASSERT_FALSE(m.is_discarded()) << o.out;
  EXPECT_EQ(m.value("wrong", 1), 0);
  ASSERT_EQ(m["ranks"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(m["ranks"][r].value("host", ""), ns(r)) << "rank r runs on host r";
    for (int k = 0; k < 4; ++k)
      if (k != r) {
        EXPECT_GT(m["matrix"][r][k].get<double>(), 0.05) << r << " -> " << k;
      }
  }
  // Every collective, each result checked, ranks on four hosts. At 1 MiB the rings on these
  // slow links (allreduce, reduce_scatter, allgather) pipeline each block in several chunks.
  o = podnet({"run", "--lab", name_, "-n", "4",  "--timeout", "50", "--", podnet_bin(), "bench", "coll", "all",
              "-b",  "1K",    "-e",  "1M", "-f", "32",        "-w", "1",  "-n",         "2",     "-c",   "1"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_NE(o.out.find("Out of bounds values : 0 OK"), std::string::npos) << o.out;
  for (int r = 0; r < 4; ++r) EXPECT_NE(o.out.find("on " + ns(r)), std::string::npos) << o.out;
  // Large alltoall blocks on slow links go one peer per step (the tuner's slow-link choice).
  o = podnet({"run", "--lab", name_, "-n", "4", "--timeout", "50", "--", podnet_bin(), "bench", "coll", "alltoall",
              "-b", "2M", "-e", "2M", "-w", "1", "-n", "2", "-c", "1"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_NE(o.out.find("Out of bounds values : 0 OK"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pairwise"), std::string::npos) << o.out;
  // The traffic went over the lab's links.
  json after = status();
  for (int h = 0; h < 4; ++h)
    EXPECT_GT(link(after, h, 0).value("tx_bytes", 0ull), link(before, h, 0).value("tx_bytes", 0ull) + (1u << 20));
}

TEST_F(LabTest, TwoRailsCarryTrafficTogether) {
  up(2, 2);
  if (IsSkipped()) return;
  json before = status();
  Outcome o = podnet({"run", "--lab", name_, "-n", "2", "--timeout", "50", "--", podnet_bin(), "bench", "p2p", "-s",
                      "4M", "-n", "16", "-w", "1", "--check"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  json after = status();
  const double total = 17.0 * (4 << 20);
  for (int r = 0; r < 2; ++r) {
    double sent =
        static_cast<double>(link(after, 0, r).value("tx_bytes", 0ull) - link(before, 0, r).value("tx_bytes", 0ull));
    double got =
        static_cast<double>(link(after, 1, r).value("rx_bytes", 0ull) - link(before, 1, r).value("rx_bytes", 0ull));
    // Striped round-robin: each rail carries about half (the check reads back over both too).
    EXPECT_GT(sent, 0.3 * total) << "rail " << r << " from h0";
    EXPECT_GT(got, 0.3 * total) << "rail " << r << " into h1";
  }
  // One rail when asked for one.
  before = after;
  o = podnet({"run", "--lab", name_, "-n", "2", "--timeout", "50", "--env", "PODNET_RAILS=1", "--", podnet_bin(),
              "bench", "p2p", "-s", "4M", "-n", "16", "-w", "1"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  after = status();
  EXPECT_GT(link(after, 0, 0).value("tx_bytes", 0ull) - link(before, 0, 0).value("tx_bytes", 0ull), total * 0.9);
  EXPECT_LT(link(after, 0, 1).value("tx_bytes", 0ull) - link(before, 0, 1).value("tx_bytes", 0ull), total * 0.05);
}

// The write ping-pong watches a payload's last byte; over 4 tcp streams on a 100 Mbit/s link
// a 4 MiB write's last stripe can land ~0.3 s before the rest. --check waits for the whole
// payload (with a 100 ms bound it counted 8 wrong in 5 iterations, checked at both ends),
// and the run reports every payload intact. The ranks' operation timeout (the world's,
// PODNET_STORE_TIMEOUT_MS, 60 s by default) is set well inside the launcher's 50 s, so that a
// stalled wait ends in the benchmark's own error naming what it waited for (a run under
// ASan in CI once hit the launcher's timeout with nothing printed; about 5 s is usual).
TEST_F(LabTest, WritePingPongOnASlowStripedLinkChecksWholePayloads) {
  up(2, 1, "100mbit");
  if (IsSkipped()) return;
  // The launcher, then the benchmark.
  std::vector<std::string> args{"run", "--lab", name_, "-n", "2", "--timeout", "50", "--env", "PODNET_TCP_STREAMS=4"};
  args.insert(args.end(),
              {"--env", "PODNET_STORE_TIMEOUT_MS=20000", "--", podnet_bin(), "bench", "p2p", "-o", "write"});
  args.insert(args.end(), {"-m", "lat", "-s", "4M", "-n", "4", "-w", "1", "--check", "--json"});
  Outcome o = podnet(args, 120);
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::string text;
  for (const std::string& l : rank_lines(o.out, 0)) text += l + "\n";
  json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_EQ(j.value("latency_kind", ""), "rtt/2");
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0].value("wrong", 1), 0) << o.out;
  EXPECT_GT(j["results"][0].value("t_min_us", 0.0), 100000.0) << "4 MiB at 100 Mbit/s takes ~0.34 s each way";
}

// A CPU mask as the kernel prints it ("3", "00000000,0000000f"), without commas and leading
// zeros, so that masks of different widths compare.
std::string bare_mask(std::string m) {
  std::erase_if(m, [](char c) { return c == ',' || c == '\n' || c == ' '; });
  m.erase(0, std::min(m.find_first_not_of('0'), m.size() - 1));
  return m;
}

// The CPUs this process may use, as bare_mask() gives them.
std::string own_cpu_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::string hex;
  for (int nibble = CPU_SETSIZE / 4 - 1; nibble >= 0; --nibble) {
    int v = 0;
    for (int b = 0; b < 4; ++b) v |= CPU_ISSET(nibble * 4 + b, &set) ? 1 << b : 0;
    if (v != 0 || !hex.empty()) hex += "0123456789abcdef"[v];
  }
  return hex.empty() ? "0" : hex;
}

// Every lab interface, at both ends of every link, steers received packets by flow to the CPUs
// `lab up` may use (docs/lab.md: without it a loaded lab delivered flows out of order); the
// switch's bridges and the hosts' lo are left as the kernel made them.
TEST_F(LabTest, EveryLinkSteersEachFlowToOneBacklog) {
  up(2, 2);
  if (IsSkipped()) return;
  auto rps = [](const std::string& ns, const std::string& dev) {
    Outcome o = run_program("ip", {"netns", "exec", ns, "cat", "/sys/class/net/" + dev + "/queues/rx-0/rps_cpus"});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    return bare_mask(o.out);
  };
  const std::string mine = own_cpu_mask(), sw = "podnet-" + name_ + "-sw";
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 2; ++r) {
      const std::string port = "h" + std::to_string(h) + "r" + std::to_string(r);
      EXPECT_EQ(rps(ns(h), "eth" + std::to_string(r)), mine) << ns(h) << " eth" << r;
      EXPECT_EQ(rps(sw, port), mine) << sw << " " << port;
    }
  EXPECT_EQ(rps(sw, "br0"), "0");
  EXPECT_EQ(rps(ns(0), "lo"), "0");

  // A lab made by a process confined to CPU 0 steers to CPU 0 alone.
  if (run_program("taskset", {"-V"}).exit_code != 0) GTEST_SKIP() << "taskset not found (Debian package util-linux)";
  const std::string second = name_ + "c";
  struct Down {
    std::string name;
    ~Down() { EXPECT_EQ(podnet({"lab", "down", "--name", name}).exit_code, 0) << name; }
  } down{second};
  Outcome o = run_program("taskset", {"-c", "0", podnet_bin(), "lab", "up", "--name", second, "--hosts", "1"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(rps("podnet-" + second + "-h0", "eth0"), "1");
  EXPECT_EQ(rps("podnet-" + second + "-sw", "h0r0"), "1");
}

// PODNET_TCP_CONGESTION on links that leave the host, read back from the kernel
// (TCP_CONGESTION of the sockets that carried a ping-pong between two lab hosts): auto keeps
// each host's own default, BBR included (docs/lab.md "Congestion control": BBR stalls long
// rings, cubic slows bursty all-to-alls); a name is set as given. The hosts' defaults are set
// inside the lab's namespaces.
TEST_F(LabTest, AutoCongestionControlKeepsTheHostsChoiceOffTheHost) {
  up(2, 1);
  if (IsSkipped()) return;
  auto set_default = [&](const std::string& cc) {
    for (int h = 0; h < 2; ++h)
      if (run_program("ip", {"netns", "exec", ns(h), "sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=" + cc})
              .exit_code != 0)
        return false;
    return true;
  };
  auto used = [&](const std::string& knob) {
    Outcome o = podnet({"run", "--lab", name_, "-n", "2", "--timeout", "50", "--env", "PODNET_TCP_CONGESTION=" + knob,
                        "--", xfer_rank_bin(), "ping-pong-sockets", "200"});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    std::vector<std::string> out;
    for (int r = 0; r < 2; ++r) {
      const std::string head = "rank " + std::to_string(r) + " congestion: ";
      if (auto l = rank_line(o.out, r, head)) out.push_back(l->substr(head.size()));
    }
    EXPECT_EQ(out.size(), 2u) << describe(o);
    return out;
  };
  std::string first = "cubic";
  if (!set_default(first)) {
    first = "reno";
    ASSERT_TRUE(set_default(first));
  }
  EXPECT_EQ(used("auto"), (std::vector<std::string>{first, first})) << "the hosts' default: " << first;
  if (!set_default("bbr")) GTEST_SKIP() << "this kernel has no bbr (tcp_bbr)";
  EXPECT_EQ(used("auto"), (std::vector<std::string>{"bbr", "bbr"}));
  EXPECT_EQ(used("reno"), (std::vector<std::string>{"reno", "reno"}));
}

TEST_F(LabTest, RunPlacesRanksPerHostAndRefusesWhatDoesNotFit) {
  up(2, 1);
  if (IsSkipped()) return;
  Outcome o = podnet({"run", "--lab", name_, "-n", "3", "--hosts", "h1,h0", "--ranks-per-host", "2", "--", "sh", "-c",
                      "echo $(hostname) $PODNET_LOCAL_RANK/$PODNET_LOCAL_WORLD_SIZE $PODNET_LAB_HOST $PODNET_IFNAME "
                      "$PODNET_STORE"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(rank_lines(o.out, 0).at(0).substr(0, ns(1).size() + 12), ns(1) + " 0/2 h1 ^eth");
  EXPECT_EQ(rank_lines(o.out, 1).at(0).substr(0, ns(1).size() + 12), ns(1) + " 1/2 h1 ^eth");
  EXPECT_EQ(rank_lines(o.out, 2).at(0).substr(0, ns(0).size() + 12), ns(0) + " 0/1 h0 ^eth");
  EXPECT_NE(rank_lines(o.out, 2).at(0).find("10.199.0.2:"), std::string::npos) << "the store is on h1's rail 0";

  o = podnet({"run", "--lab", name_, "-n", "5", "--ranks-per-host", "2", "--", "true"});
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("5 ranks do not fit on 2 hosts"), std::string::npos) << o.err;
  o = podnet({"run", "--lab", "nosuchlab-" + name_, "-n", "2", "--", "true"});
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("does not exist"), std::string::npos) << o.err;
}

}  // namespace
