// Runs a program (usually the podnet launcher) the way a test needs it: stdout and stderr
// captured, a callback every ~20 ms to send signals at the right moment, and a hard limit
// after which the program is SIGKILLed and the test fails, so a hang cannot hang the suite.
// Shared by the tests in this folder.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace podnet::testing {

using Clock = std::chrono::steady_clock;

struct Outcome {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  std::string out, err;
  double seconds = 0;
};

// Called about every 20 ms while the program runs, with its pid, its output so far and the
// seconds since it started: the place to send signals at the right moment.
using OnTick = std::function<void(pid_t, const Outcome&, double)>;

// Runs `program args...` with stdout and stderr captured; past `limit_s` it is SIGKILLed and
// the test fails, so a hang cannot hang the suite.
inline Outcome run_program(const std::string& program, const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env = {}, const OnTick& on_tick = {},
                    double limit_s = 60) {
  Outcome o;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return o;
  }
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execvpe(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  bool out_open = true, err_open = true, killed = false;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    poll(fds, 2, 20);
    char buf[65536];
    if (fds[0].revents != 0) {
      ssize_t n = read(out_pipe[0], buf, sizeof buf);
      if (n > 0) o.out.append(buf, static_cast<size_t>(n));
      else out_open = false;
    }
    if (fds[1].revents != 0) {
      ssize_t n = read(err_pipe[0], buf, sizeof buf);
      if (n > 0) o.err.append(buf, static_cast<size_t>(n));
      else err_open = false;
    }
    double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (on_tick && !killed) on_tick(pid, o, t);
    if (!killed && t > limit_s) {
      ADD_FAILURE() << program << " still running after " << limit_s << " s; killing it";
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.term_signal = WTERMSIG(status);
  return o;
}

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v != nullptr ? v : fallback;
}
inline std::string podnet_bin() { return env_or("PODNET_BIN", "podnet"); }
inline std::string describe(const Outcome& o) {
  return "exit " + std::to_string(o.exit_code) + " signal " + std::to_string(o.term_signal) + " after " +
         std::to_string(o.seconds) + " s\n--- stdout:\n" + o.out + "--- stderr:\n" + o.err;
}

// The lines rank `rank` wrote, without the launcher's "[rank] " prefix.
inline std::vector<std::string> rank_lines(const std::string& text, int rank) {
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  return lines;
}

// The first line of `rank` that starts with `start`, if any.
inline std::optional<std::string> rank_line(const std::string& text, int rank, const std::string& start) {
  for (const std::string& line : rank_lines(text, rank))
    if (line.rfind(start, 0) == 0) return line;
  return std::nullopt;
}

// The rank program of the transfer tests (tests/tools/xfer_rank.cc).
inline std::string xfer_rank_bin() { return env_or("PODNET_XFER_RANK", "podnet_xfer_rank"); }

}  // namespace podnet::testing
