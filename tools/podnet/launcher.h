// The process manager behind `podnet run`: starts N local ranks, forwards their output line
// by line, forwards signals to them, and stops the whole job when one rank fails.
//
// Blocking: run_job() blocks until every rank has been reaped (it never leaves a zombie or an
// orphaned rank behind, except for processes a rank deliberately moved out of its own
// process group). It waits in poll(2) on the ranks' pipes and a signalfd; it never spins.
// Thread-safety: call from the main thread only, once at a time. run_job() blocks SIGCHLD,
// SIGINT, SIGTERM and SIGHUP in the calling thread before any other thread (the store
// server's) is created, so those signals reach it through a signalfd; the original mask and
// dispositions are restored before it returns and in every rank before exec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podnet::tool {

struct JobOptions {
  int nranks = 1;
  std::vector<std::string> command;  // argv of every rank; command[0] is looked up in PATH
  std::vector<std::string> env;      // extra "KEY=VALUE" entries, applied over the inherited
                                     // environment (the PODNET_* rank variables win)
  bool prefix = true;                // prefix each forwarded line with "[rank] "
  int grace_ms = 3000;               // SIGTERM (or a forwarded signal) -> SIGKILL delay
  double timeout_s = 0;              // whole-job wall-clock limit; 0 = none
  // --lab: ranks start inside the hosts of this lab (lab.h, launcher_lab.h) instead of here.
  std::string lab;                     // empty: every rank on this host
  std::vector<std::string> lab_hosts;  // "h3" or "3"; empty: every host of the lab
  int ranks_per_host = 0;              // 0: ceil(nranks / hosts)
  // "core": rank i runs on the i-th CPU the launcher may use (mpirun's default for small
  // jobs), only when there are at least as many CPUs as ranks; "none": the scheduler's choice;
  // "auto": core, except none when the ranks use verbs over a software RDMA device only
  // (bootstrap::software_rdma_devices).
  std::string bind_to = "auto";
};

// Exit codes other than a rank's own (documented in `podnet run --help`).
inline constexpr int kExitSetupFailed = 1;      // bad option, store failed to start, fork failed
inline constexpr int kExitTimeout = 124;        // --timeout passed (like timeout(1))
inline constexpr int kExitCannotExecute = 126;  // the command exists but exec failed
inline constexpr int kExitNotFound = 127;       // the command is not in PATH

// Runs the job and returns the launcher's exit code: 0 when every rank exited 0; else the
// exit code of the first rank that failed (128 + signal number when it was killed), 124 on
// --timeout, 128 + signal number when the launcher itself got SIGINT/SIGTERM/SIGHUP, or one
// of the codes above. Problems are reported on stderr as "podnet run: ...".
int run_job(const JobOptions& options);

// "SIGKILL" for 9; "signal 70" for numbers without a name.
std::string signal_name(int signo);

}  // namespace podnet::tool
