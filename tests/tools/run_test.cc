// `podnet run` end to end: the built binary (PODNET_BIN) starts real ranks, and each test
// checks what a user would see: the ranks' environment and output, the launcher's messages
// and exit code, and that no rank outlives the launcher.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

#include "process.h"

namespace {

using namespace podnet::testing;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines = lines_of(text);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Called with the launcher's pid and its stdout so far while it runs.
using OnOutput = std::function<void(pid_t, const std::string&)>;

Outcome podnet(const std::vector<std::string>& args, const OnOutput& on_output = {}) {
  OnTick tick;
  if (on_output) tick = [on_output](pid_t pid, const Outcome& o, double) { on_output(pid, o.out); };
  return run_program(podnet_bin(), args, {}, tick, 20);
}


// A directory where ranks leave their pids, to check afterwards that none survived.
class PidDir {
 public:
  PidDir() {
    char tmpl[] = "/tmp/podnet_run_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~PidDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  // Shell snippet: record this shell's pid (kept by `exec`).
  std::string record() const { return "echo $$ > " + path_ + "/pid.$PODNET_RANK; "; }
  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      std::ifstream in(entry.path());
      pid_t pid = 0;
      if (in >> pid) out.push_back(pid);
    }
    return out;
  }
  void expect_all_gone() const {
    for (pid_t pid : pids()) EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH) << "rank pid " << pid << " survived";
  }

 private:
  std::string path_;
};

// Sends `signo` to the launcher once `count` lines "[i] ready" have arrived.
OnOutput signal_when_ready(int count, int signo, bool* sent) {
  return [=](pid_t launcher, const std::string& out) {
    size_t ready = 0;
    for (const std::string& line : lines_of(out))
      if (line.find("] ready") != std::string::npos) ++ready;
    if (!*sent && ready == static_cast<size_t>(count)) {
      kill(launcher, signo);
      *sent = true;
    }
  };
}

TEST(Run, EveryRankSeesItsRankAndWorldSize) {
  Outcome o = podnet({"run", "-n", "4", "--", "sh", "-c", "echo $PODNET_RANK/$PODNET_WORLD_SIZE"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] 0/4", "[1] 1/4", "[2] 2/4", "[3] 3/4"}));
  EXPECT_EQ(o.err, "");
}

TEST(Run, LocalRankVariables) {
  Outcome o = podnet({"run", "-n", "2", "sh", "-c", "echo $PODNET_LOCAL_RANK/$PODNET_LOCAL_WORLD_SIZE"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] 0/2", "[1] 1/2"}));
}

TEST(Run, StoreIsReachable) {
  Outcome o = podnet({"run", "-n", "2", "--", "bash", "-c",
                      "exec 3<>/dev/tcp/${PODNET_STORE%:*}/${PODNET_STORE##*:} && echo connected $PODNET_STORE"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::vector<std::string> lines = sorted_lines(o.out);
  ASSERT_EQ(lines.size(), 2u) << describe(o);
  EXPECT_EQ(lines[0].rfind("[0] connected 127.0.0.1:", 0), 0u) << lines[0];
  EXPECT_EQ(lines[0].substr(4), lines[1].substr(4)) << "ranks got different stores";
}

TEST(Run, FailingRankStopsTheOthers) {
  PidDir dir;
  Outcome o = podnet({"run", "-n", "4", "--", "sh", "-c",
                      dir.record() + "if [ $PODNET_RANK = 2 ]; then sleep 0.3; exit 3; fi; exec sleep 30"});
  EXPECT_EQ(o.exit_code, 3) << describe(o);
  EXPECT_NE(o.err.find("rank 2 (pid "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("exited with code 3; stopping the other 3 ranks"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 10);
  EXPECT_EQ(dir.pids().size(), 4u);
  dir.expect_all_gone();
}

TEST(Run, KilledRankIsReportedWithTheSignalName) {
  Outcome o = podnet({"run", "-n", "2", "--", "sh", "-c",
                      "if [ $PODNET_RANK = 1 ]; then kill -9 $$; fi; exec sleep 30"});
  EXPECT_EQ(o.exit_code, 128 + SIGKILL) << describe(o);
  EXPECT_NE(o.err.find("rank 1 (pid "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("killed by signal SIGKILL"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 10);
}

TEST(Run, SigintIsForwardedToRanks) {
  PidDir dir;
  bool sent = false;
  Outcome o = podnet({"run", "-n", "3", "--", "sh", "-c", dir.record() + "echo ready; exec sleep 30"},
                     signal_when_ready(3, SIGINT, &sent));
  ASSERT_TRUE(sent) << "the ranks' output did not arrive while they ran\n" << describe(o);
  EXPECT_EQ(o.exit_code, 128 + SIGINT) << describe(o);
  EXPECT_NE(o.err.find("received SIGINT"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 10);
  dir.expect_all_gone();
}

TEST(Run, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  bool sent = false;
  Outcome o = podnet({"run", "-n", "1", "--grace-ms", "300", "--", "sh", "-c",
                      "trap '' TERM; echo ready; while :; do sleep 0.1; done"},
                     signal_when_ready(1, SIGTERM, &sent));
  ASSERT_TRUE(sent) << describe(o);
  EXPECT_EQ(o.exit_code, 128 + SIGTERM) << describe(o);
  EXPECT_NE(o.err.find("did not stop within 300 ms; sending SIGKILL"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 10);
}

TEST(Run, TimeoutStopsEverything) {
  PidDir dir;
  Outcome o = podnet({"run", "-n", "2", "--timeout", "1", "--", "sh", "-c", dir.record() + "exec sleep 30"});
  EXPECT_EQ(o.exit_code, 124) << describe(o);
  EXPECT_NE(o.err.find("timeout"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("ranks 0, 1 still running"), std::string::npos) << o.err;
  EXPECT_GT(o.seconds, 0.9);
  EXPECT_LT(o.seconds, 10);
  dir.expect_all_gone();
}

TEST(Run, StderrIsForwardedToStderr) {
  Outcome o = podnet({"run", "-n", "2", "--", "sh", "-c", "echo out; echo err >&2"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] out", "[1] out"}));
  EXPECT_EQ(sorted_lines(o.err), (std::vector<std::string>{"[0] err", "[1] err"}));
}

TEST(Run, NoPrefix) {
  Outcome o = podnet({"run", "--no-prefix", "-n", "2", "--", "sh", "-c", "echo hi"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(o.out, "hi\nhi\n");
}

TEST(Run, EnvOptionsReachEveryRank) {
  Outcome o = podnet({"run", "-n", "2", "--env", "FOO=bar", "--env", "FOO=baz", "--env", "X=a b", "sh", "-c",
                      "echo \"$FOO $X\""});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] baz a b", "[1] baz a b"}));
}

// Placement: rank i on the i-th usable CPU by default (auto and core), unbound with none.
// auto leaves ranks unbound only for verbs over software RDMA devices, which this host does
// not have unless /sys/class/infiniband is full of them (then that case is skipped).
TEST(Run, RanksAreBoundToOneCpuEachUnlessTold) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs 2 usable CPUs, this process may use " << CPU_COUNT(&allowed);
  const std::string show = "grep Cpus_allowed_list /proc/self/status | cut -f2";
  auto cpus_of = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--", "sh", "-c", show});
    Outcome o = podnet(args);
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    return sorted_lines(o.out);
  };
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE && usable.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) usable.push_back(c);
  const std::vector<std::string> bound = {"[0] " + std::to_string(usable[0]), "[1] " + std::to_string(usable[1])};
  EXPECT_EQ(cpus_of({"run", "-n", "2"}), bound);
  EXPECT_EQ(cpus_of({"run", "-n", "2", "--bind-to", "core"}), bound);
  auto none = cpus_of({"run", "-n", "2", "--bind-to", "none"});
  EXPECT_NE(none, bound) << "--bind-to none still bound the ranks";
  std::error_code ec;
  if (std::filesystem::exists("/sys/class/infiniband", ec) &&
      !std::filesystem::is_empty("/sys/class/infiniband", ec))
    GTEST_SKIP() << "this host has RDMA devices: the verbs case depends on what they are";
  EXPECT_EQ(cpus_of({"run", "-n", "2", "--env", "PODNET_TRANSPORT=verbs"}), bound)
      << "without software RDMA devices auto binds verbs ranks too";
}

// More ranks than usable CPUs: consecutive ranks share a CPU in equal blocks (rank i on usable
// CPU i * C / N), so that the placement does not change from run to run; none leaves them
// unbound.
TEST(Run, OversubscribedRanksShareCpusInBlocks) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) usable.push_back(c);
  const int nc = static_cast<int>(usable.size()), n = 2 * nc + 1;
  if (n > 64) GTEST_SKIP() << nc << " usable CPUs: " << n << " ranks are more than this test starts";
  const std::string show = "grep Cpus_allowed_list /proc/self/status | cut -f2";
  Outcome o = podnet({"run", "-n", std::to_string(n), "--", "sh", "-c", show});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::vector<std::string> want;
  for (int i = 0; i < n; ++i)
    want.push_back("[" + std::to_string(i) + "] " + std::to_string(usable[static_cast<size_t>(i * nc / n)]));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sorted_lines(o.out), want);
  Outcome none = podnet({"run", "-n", std::to_string(n), "--bind-to", "none", "--", "sh", "-c", show});
  ASSERT_EQ(none.exit_code, 0) << describe(none);
  if (nc > 1) {
    for (const std::string& line : sorted_lines(none.out))
      EXPECT_NE(line.find_first_of(",-"), std::string::npos) << "--bind-to none bound a rank: " << line;
  }
}

TEST(Run, EnvCannotOverrideRankVariables) {
  Outcome o = podnet({"run", "-n", "1", "--env", "PODNET_RANK=7", "--", "true"});
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("PODNET_RANK"), std::string::npos) << o.err;
}

// Lines far longer than a pipe's atomic write size, from 4 ranks at once: each arrives whole.
TEST(Run, LongLinesAreNeverMixed) {
  Outcome o = podnet({"run", "-n", "4", "--", "awk",
                      "BEGIN { s = ENVIRON[\"PODNET_RANK\"]; while (length(s) < 20000) s = s s;"
                      " s = substr(s, 1, 20000); for (i = 0; i < 50; i++) print s }"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::vector<std::string> lines = lines_of(o.out);
  ASSERT_EQ(lines.size(), 200u);
  for (const std::string& line : lines) {
    ASSERT_EQ(line.size(), 4u + 20000u);
    char r = line[1];
    EXPECT_EQ(line.substr(0, 4), std::string("[") + r + "] ");
    EXPECT_EQ(line.find_first_not_of(r, 4), std::string::npos) << "rank " << r << " line mixed with another";
  }
}

TEST(Run, LastLineWithoutNewlineIsCompleted) {
  Outcome o = podnet({"run", "-n", "1", "--", "printf", "a\\nb"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(o.out, "[0] a\n[0] b\n");
}

TEST(Run, RanksInheritOnlyStdio) {
  // An fd the launcher inherits without O_CLOEXEC must not reach the ranks either.
  int leaked = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  Outcome o = podnet({"run", "-n", "1", "--", "sh", "-c", "ls /proc/$$/fd; true"});
  close(leaked);
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(lines_of(o.out), (std::vector<std::string>{"[0] 0", "[0] 1", "[0] 2"}));
}

TEST(Run, StdinIsDevNull) {
  Outcome o = podnet({"run", "-n", "2", "--", "sh", "-c", "cat; echo done"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] done", "[1] done"}));
}

TEST(Run, CommandNotFound) {
  Outcome o = podnet({"run", "-n", "2", "--", "podnet-no-such-command"});
  EXPECT_EQ(o.exit_code, 127) << describe(o);
  EXPECT_NE(o.err.find("podnet-no-such-command: command not found"), std::string::npos) << o.err;
  o = podnet({"run", "-n", "2", "--", "/nonexistent/podnet-cmd"});
  EXPECT_EQ(o.exit_code, 127) << describe(o);
}

TEST(Run, CommandThatCannotBeExecuted) {
  PidDir dir;
  const std::string script = dir.path() + "/bad-interpreter";
  std::ofstream(script) << "#!/nonexistent/interpreter\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  Outcome o = podnet({"run", "-n", "2", "--", script});
  EXPECT_EQ(o.exit_code, 126) << describe(o);
  EXPECT_NE(o.err.find("cannot start rank 0: exec " + script), std::string::npos) << o.err;
}

TEST(Run, AllRanksSucceedingAtDifferentTimesExitsZero) {
  Outcome o = podnet({"run", "-n", "3", "--", "sh", "-c", "sleep 0.$PODNET_RANK; echo done"});
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"[0] done", "[1] done", "[2] done"}));
}

TEST(Run, HelpExplainsOptionsAndEnvironment) {
  Outcome o = podnet({"run", "--help"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  for (const char* word : {"-n", "--env", "--no-prefix", "--grace-ms", "--timeout", "PODNET_RANK",
                           "PODNET_WORLD_SIZE", "PODNET_LOCAL_RANK", "PODNET_LOCAL_WORLD_SIZE", "PODNET_STORE",
                           "SIGKILL", "124", "Exit code"})
    EXPECT_NE(o.out.find(word), std::string::npos) << "help does not mention " << word << "\n" << o.out;
}

// Every usage error exits 2 with CLI11's message (docs/cli.md), not CLI11's own codes.
TEST(Cli, UsageErrorsExitTwoAndSayWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", "p2p", "--window", "0"}, "--window"},            // out of range
      {{"bench", "p2p", "--alloc", "--hugepages"}, "excludes"},   // excluded options
      {{"bench", "p2p", "-o", "bogus"}, "bogus"},                 // not one of the choices
      {{"bench", "p2p", "--no-such-option"}, "no-such-option"},   // unknown option
      {{"no-such-command"}, "subcommand"},                        // unknown subcommand
      {{}, "subcommand"},                                          // none given
  };
  for (const auto& [args, says] : cases) {
    Outcome o = podnet(args);
    EXPECT_EQ(o.exit_code, 2) << describe(o);
    EXPECT_NE(o.err.find(says), std::string::npos) << describe(o);
  }
  const std::vector<std::vector<std::string>> fine = {{"--help"}, {"--version"}, {"bench", "p2p", "--help"}};
  for (const auto& args : fine) {
    Outcome o = podnet(args);
    EXPECT_EQ(o.exit_code, 0) << describe(o);
  }
}

bool in_path(const std::string& name) {
  const char* path = getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

// Ranks started by Open MPI's mpirun find their rank where launch_env looks for it.
TEST(Mpirun, StartsRanksWithOmpiEnvironment) {
  if (!in_path("mpirun")) GTEST_SKIP() << "mpirun not in PATH (Debian: apt-get install openmpi-bin)";
  Outcome o = run_program("mpirun",
                          {"-n", "2", "--allow-run-as-root", "--oversubscribe", "sh", "-c",
                           "echo $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE"},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(sorted_lines(o.out), (std::vector<std::string>{"0/2", "1/2"}));
}

}  // namespace
