#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/netif.h"
#include "bootstrap/store.h"
#include "launcher_lab.h"

extern char** environ;

namespace podnet::tool {
namespace {

// A line longer than this without a newline is forwarded in pieces, so that a rank that never
// prints a newline cannot make the launcher buffer without bound.
constexpr size_t kMaxLine = size_t{1} << 20;
// Reading a rank's pipes after it exited stops here: a grandchild that outlived the rank
// and keeps writing must not keep the launcher busy forever.
constexpr size_t kMaxDrain = size_t{16} << 20;
// Added to the errno a child reports when it could not enter its lab host (not exec's).
constexpr int kEnterFailed = 1 << 20;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Writes everything unless the reader went away (EPIPE): a closed stdout must not stop the
// launcher from draining the ranks' pipes and supervising them.
void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN) {  // an inherited O_NONBLOCK stdout
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (errno != EINTR) {
      return;
    }
  }
}

template <typename... A>
void report(fmt::format_string<A...> f, A&&... a) {
  write_all(STDERR_FILENO, "podnet run: " + fmt::format(f, std::forward<A>(a)...) + "\n");
}

std::string plural_ranks(size_t n) { return n == 1 ? "rank" : fmt::format("{} ranks", n); }

// Blocks the signals the launcher handles (they arrive through a signalfd instead) and
// makes sure SIGCHLD is not ignored, which would make the kernel reap ranks behind our back.
// A stop signal the launcher was started with ignored (nohup, `cmd &` in a script) stays
// ignored, for the launcher and its ranks: a blocked signal would be queued even so.
// SIGPIPE is ignored so that a closed stdout is an EPIPE, not the launcher's death.
class SignalGuard {
 public:
  SignalGuard() {
    sigemptyset(&handled_);
    sigaddset(&handled_, SIGCHLD);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      if (sigaction(s, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&handled_, s);
    }
    pthread_sigmask(SIG_BLOCK, &handled_, &old_mask_);
    struct sigaction dfl {}, ign {};
    dfl.sa_handler = SIG_DFL;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &dfl, &old_chld_);
    sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalGuard() {
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  const sigset_t& handled() const { return handled_; }
  // Called in a forked child before exec: only async-signal-safe calls.
  void restore_in_child() const {
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t handled_, old_mask_;
  struct sigaction old_chld_ {}, old_pipe_ {};
};

// Finds the executable the way execvp would, but before fork, so that "command not found"
// is one clear message instead of N failing ranks.
Result<std::string> resolve_command(const std::string& name, int* exit_code) {
  auto runnable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    *exit_code = ::access(name.c_str(), F_OK) == 0 ? kExitCannotExecute : kExitNotFound;
    return Status::InvalidArgument("{}: {}", name,
                                   *exit_code == kExitNotFound ? "no such file" : "not an executable file");
  }
  const char* env_path = ::getenv("PATH");
  std::string_view path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    size_t colon = path.find(':');
    std::string dir(path.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  *exit_code = kExitNotFound;
  return Status::InvalidArgument("{}: command not found in PATH", name);
}

// stdin, stdout and stderr must be open before the launcher creates pipes, or a pipe could
// land on fd 1 and be clobbered by the dup2 in the child.
void ensure_stdio_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int null_fd = ::open("/dev/null", O_RDWR);
      if (null_fd >= 0 && null_fd != fd) {
        ::dup2(null_fd, fd);
        ::close(null_fd);
      }
    }
  }
}

std::string_view key_of(std::string_view env_entry) { return env_entry.substr(0, env_entry.find('=')); }

bool is_rank_key(std::string_view key) {
  for (std::string_view k : {"PODNET_RANK", "PODNET_WORLD_SIZE", "PODNET_LOCAL_RANK", "PODNET_LOCAL_WORLD_SIZE",
                             "PODNET_STORE", "PODNET_LAB", "PODNET_LAB_HOST"})
    if (key == k) return true;
  return false;
}

struct Stream {
  UniqueFd fd;  // read end of the rank's pipe, non-blocking; reset at EOF
  int out_fd = -1;
  std::string pending;  // bytes after the last newline
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  std::string prefix;
  Stream out, err;
  std::vector<std::string> env;
  int netns_fd = -1;     // --lab: the host namespace to enter before exec (owned by the placement)
  std::string hostname;  // --lab: the hostname the rank sees (its UTS namespace's)
  int cpu = -1;          // --bind-to core: the CPU the rank is bound to
};

class Job {
 public:
  explicit Job(const JobOptions& options) : options_(options) {}
  int run();

 private:
  Status spawn(Rank& rank, const std::string& path, const SignalGuard& signals, int null_fd);
  void supervise(int signal_fd);
  void on_signal(int signo);
  void reap();
  void on_exit(Rank& rank, int status);
  void on_deadlines(int64_t now);
  void begin_stop(int signo, int exit_code);
  void signal_rank(const Rank& rank, int signo);
  void pump(Rank& rank, Stream& s, bool drain);
  void emit(const Rank& rank, Stream& s, bool eof);
  std::vector<Rank*> running_ranks();

  const JobOptions& options_;
  std::unique_ptr<LabPlacement> lab_;
  std::vector<Rank> ranks_;
  size_t live_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  int exit_code_ = 0;
  int64_t timeout_deadline_ms_ = -1;
  int64_t kill_deadline_ms_ = -1;
};

std::vector<Rank*> Job::running_ranks() {
  std::vector<Rank*> out;
  for (Rank& r : ranks_)
    if (r.running) out.push_back(&r);
  return out;
}

Status Job::spawn(Rank& rank, const std::string& path, const SignalGuard& signals, int null_fd) {
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Unavailable("pipe2: {}", strerror(errno));
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Status::Unavailable("pipe2: {}", strerror(errno));
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return Status::Unavailable("pipe2: {}", strerror(errno));
  UniqueFd exec_r(exec_pipe[0]), exec_w(exec_pipe[1]);

  // Everything the child needs is built here: after fork it may only make system calls.
  std::vector<char*> argv, envp;
  for (const std::string& a : options_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : rank.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable("fork: {}", strerror(errno));
  if (pid == 0) {
    // Own process group: the launcher signals a rank's whole tree, and a terminal's Ctrl-C
    // reaches the ranks once, through the launcher, not twice.
    ::setpgid(0, 0);
    // A launcher that dies without cleaning up (SIGKILL, OOM) takes its ranks with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitCannotExecute);
    // A lab rank enters its host's network namespace, and a UTS namespace of its own with the
    // host's name, so that it tells lab hosts apart by name like real ones.
    if (rank.netns_fd >= 0 && (::setns(rank.netns_fd, CLONE_NEWNET) != 0 || ::unshare(CLONE_NEWUTS) != 0 ||
                               ::sethostname(rank.hostname.data(), rank.hostname.size()) != 0)) {
      int err = errno + kEnterFailed;
      (void)!::write(exec_w.get(), &err, sizeof err);
      ::_exit(kExitCannotExecute);
    }
    if (rank.cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(rank.cpu, &one);
      (void)::sched_setaffinity(0, sizeof one, &one);  // best effort: a refusal leaves it unbound
    }
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_w.get(), STDOUT_FILENO);
    ::dup2(err_w.get(), STDERR_FILENO);
    signals.restore_in_child();
    // Fds the launcher inherited without O_CLOEXEC must not leak into the ranks either.
    const int keep = exec_w.get();
    ::close_range(3, static_cast<unsigned>(keep - 1), 0);
    ::close_range(static_cast<unsigned>(keep + 1), UINT_MAX, 0);
    ::execve(path.c_str(), argv.data(), envp.data());
    int err = errno;
    (void)!::write(keep, &err, sizeof err);
    ::_exit(kExitCannotExecute);
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before we may signal it
  rank.pid = pid;
  rank.running = true;
  ++live_;
  out_w.reset();
  err_w.reset();
  exec_w.reset();
  // EOF means exec succeeded (the pipe is O_CLOEXEC); an int is the child's exec errno.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_r.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    rank.running = false;
    --live_;
    if (child_errno >= kEnterFailed)
      return Status::Unavailable("entering lab host {}: {}", rank.hostname, strerror(child_errno - kEnterFailed));
    // kInvalidArgument: the command cannot run here (as opposed to the launcher lacking
    // resources), which maps to exit code 126 like a shell's.
    return Status::InvalidArgument("exec {}: {}", path, strerror(child_errno));
  }
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  rank.out.fd = std::move(out_r);
  rank.out.out_fd = STDOUT_FILENO;
  rank.err.fd = std::move(err_r);
  rank.err.out_fd = STDERR_FILENO;
  PODNET_DEBUG(kTool, "rank {} started as pid {}", rank.index, pid);
  return Status::Ok();
}

// Forwards whole lines only, each with the rank's prefix, so the output of different ranks
// never mixes within a line however the ranks' writes were split.
void Job::emit(const Rank& rank, Stream& s, bool eof) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += rank.prefix;
    out.append(s.pending, start, nl + 1 - start);
  }
  s.pending.erase(0, start);
  if (!s.pending.empty() && (eof || s.pending.size() >= kMaxLine)) {
    out += rank.prefix;
    out += s.pending;
    out += '\n';
    s.pending.clear();
  }
  if (!out.empty()) write_all(s.out_fd, out);
}

// One read per wakeup keeps a chatty rank from starving the others; `drain` reads what a
// rank that has exited left in its pipe.
void Job::pump(Rank& rank, Stream& s, bool drain) {
  char buf[65536];
  size_t total = 0;
  while (s.fd.valid()) {
    ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      emit(rank, s, false);
      total += static_cast<size_t>(n);
      if (!drain || total >= kMaxDrain) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !drain) return;
    if (n < 0 && errno != EAGAIN) report("rank {}: read from its pipe: {}", rank.index, strerror(errno));
    emit(rank, s, true);
    s.fd.reset();
  }
}

void Job::signal_rank(const Rank& rank, int signo) {
  // A rank that moved itself into another group is still signalled directly.
  if (::kill(-rank.pid, signo) != 0) ::kill(rank.pid, signo);
}

void Job::begin_stop(int signo, int exit_code) {
  stopping_ = true;
  exit_code_ = exit_code;
  for (Rank* r : running_ranks()) signal_rank(*r, signo);
  kill_deadline_ms_ = now_ms() + options_.grace_ms;
}

void Job::on_signal(int signo) {
  if (signo == SIGCHLD) return reap();
  std::vector<Rank*> running = running_ranks();
  if (stopping_) {
    // A second Ctrl-C means "now": skip the rest of the grace period.
    report("received {} while stopping; killing {} with SIGKILL", signal_name(signo), plural_ranks(running.size()));
    for (Rank* r : running) signal_rank(*r, SIGKILL);
    killed_ = true;
    kill_deadline_ms_ = -1;
    return;
  }
  report("received {}; forwarding it to {} (SIGKILL after {} ms)", signal_name(signo),
         plural_ranks(running.size()), options_.grace_ms);
  begin_stop(signo, 128 + signo);
}

void Job::on_exit(Rank& rank, int status) {
  rank.running = false;
  --live_;
  pump(rank, rank.out, true);
  pump(rank, rank.err, true);
  const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  PODNET_DEBUG(kTool, "rank {} (pid {}) ended with wait status {:#x}", rank.index, rank.pid, status);
  if (!failed || stopping_) return;
  std::string what = WIFEXITED(status) ? fmt::format("exited with code {}", WEXITSTATUS(status))
                                       : fmt::format("killed by signal {}", signal_name(WTERMSIG(status)));
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (live_ == 0) {
    report("rank {} (pid {}) {}", rank.index, rank.pid, what);
  } else {
    report("rank {} (pid {}) {}; stopping the other {}", rank.index, rank.pid, what, plural_ranks(live_));
  }
  begin_stop(SIGTERM, code);
}

void Job::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (Rank& r : ranks_)
      if (r.running && r.pid == pid) on_exit(r, status);
  }
}

void Job::on_deadlines(int64_t now) {
  if (!stopping_ && timeout_deadline_ms_ >= 0 && now >= timeout_deadline_ms_) {
    std::vector<Rank*> running = running_ranks();
    std::string which, pids;
    for (Rank* r : running) {
      which += fmt::format("{}{}", which.empty() ? "" : ", ", r->index);
      pids += fmt::format("{}{}", pids.empty() ? "" : ", ", r->pid);
    }
    report("timeout: {:g} s passed; {} {} still running (pid{} {}); stopping {}", options_.timeout_s,
           running.size() == 1 ? "rank" : "ranks", which, running.size() == 1 ? "" : "s", pids,
           running.size() == 1 ? "it" : "them");
    begin_stop(SIGTERM, kExitTimeout);
  }
  if (!killed_ && kill_deadline_ms_ >= 0 && now >= kill_deadline_ms_) {
    for (Rank* r : running_ranks()) {
      report("rank {} (pid {}) did not stop within {} ms; sending SIGKILL", r->index, r->pid, options_.grace_ms);
      signal_rank(*r, SIGKILL);
    }
    killed_ = true;
    kill_deadline_ms_ = -1;
  }
}

void Job::supervise(int signal_fd) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, Stream*>> owners;
  while (live_ > 0) {
    fds.assign(1, pollfd{signal_fd, POLLIN, 0});
    owners.assign(1, {nullptr, nullptr});
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (!s->fd.valid()) continue;
        fds.push_back(pollfd{s->fd.get(), POLLIN, 0});
        owners.emplace_back(&r, s);
      }
    }
    int64_t next = -1;
    for (int64_t d : {stopping_ ? -1 : timeout_deadline_ms_, killed_ ? -1 : kill_deadline_ms_})
      if (d >= 0 && (next < 0 || d < next)) next = d;
    int wait_ms = next < 0 ? -1 : static_cast<int>(std::clamp<int64_t>(next - now_ms(), 0, INT_MAX));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      report("poll: {}", strerror(errno));
      ::poll(nullptr, 0, 10);  // should not happen; never spin on it
    }
    // Pipes first: a rank's last lines are forwarded before the news of its exit.
    for (size_t i = 1; i < fds.size(); ++i) {
      auto [rank, stream] = owners[i];
      if (fds[i].revents != 0 && stream->fd.valid()) pump(*rank, *stream, false);
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si[16];
      ssize_t n;
      while ((n = ::read(signal_fd, si, sizeof si)) > 0)
        for (size_t k = 0; k < static_cast<size_t>(n) / sizeof si[0]; ++k) on_signal(static_cast<int>(si[k].ssi_signo));
    }
    on_deadlines(now_ms());
  }
}

int Job::run() {
  if (options_.nranks < 1) {
    report("-n must be at least 1, not {}", options_.nranks);
    return kExitSetupFailed;
  }
  if (options_.command.empty()) {
    report("no command given; usage: podnet run -n N [options] -- CMD [ARGS...]");
    return kExitSetupFailed;
  }
  for (const std::string& e : options_.env) {
    if (e.find('=') == std::string::npos || e.front() == '=') {
      report("--env '{}': expected KEY=VALUE", e);
      return kExitSetupFailed;
    }
    if (is_rank_key(key_of(e))) {
      report("--env '{}': podnet run sets {} itself, per rank", e, key_of(e));
      return kExitSetupFailed;
    }
  }
  int not_found_code = kExitNotFound;
  Result<std::string> path = resolve_command(options_.command[0], &not_found_code);
  if (!path.ok()) {
    report("{}", path.status().message());
    return not_found_code;
  }
  ensure_stdio_open();

  // Signals must be blocked before the store starts its thread, or they would be delivered
  // to that thread instead of our signalfd.
  SignalGuard signals;
  UniqueFd signal_fd(::signalfd(-1, &signals.handled(), SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd.valid()) {
    report("signalfd: {}", strerror(errno));
    return kExitSetupFailed;
  }
  std::string store_ip = "127.0.0.1";
  if (!options_.lab.empty()) {
    auto placed = place_on_lab(options_.lab, options_.lab_hosts, options_.ranks_per_host, options_.nranks);
    if (!placed.ok()) {
      report("--lab {}: {}", options_.lab, placed.status().message());
      return kExitSetupFailed;
    }
    lab_ = std::move(placed).value();
    store_ip = lab_->store_ip;
  }
  // With --lab the store listens in the first host's namespace, on its rail-0 address, so that
  // every rank reaches it over the lab's network.
  auto store = lab_ ? start_store_in(lab_->hosts[0].ns_fd, store_ip) : bootstrap::StoreServer::start(store_ip, 0);
  if (!store.ok()) {
    report("cannot start the rendezvous store: {}", store.status().to_string());
    return kExitSetupFailed;
  }
  const std::string store_address = fmt::format("{}:{}", store_ip, (*store)->port());
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) {
    report("open /dev/null: {}", strerror(errno));
    return kExitSetupFailed;
  }

  // The inherited environment, then --env (the last one for a key wins), then the rank's own
  // variables, which nothing overrides.
  std::vector<std::string> base;
  for (char** e = environ; *e != nullptr; ++e)
    if (!is_rank_key(key_of(*e))) base.emplace_back(*e);
  for (const std::string& e : options_.env) {
    std::erase_if(base, [&e](const std::string& b) { return key_of(b) == key_of(e); });
    base.push_back(e);
  }
  // Every rank is on this host, so the ranks talk over loopback unless told otherwise; lab
  // ranks use every lab interface (eth0 .. eth<R-1>; one rail each).
  auto unset = [&base](std::string_view key) {
    return std::none_of(base.begin(), base.end(), [key](const std::string& b) { return key_of(b) == key; });
  };
  if (unset("PODNET_IFNAME")) base.emplace_back(lab_ ? "PODNET_IFNAME=^eth" : "PODNET_IFNAME=lo");
  if (lab_ && unset("PODNET_RAILS")) base.emplace_back(fmt::format("PODNET_RAILS={}", lab_->rails));

  ranks_.resize(static_cast<size_t>(options_.nranks));
  const std::string n = std::to_string(options_.nranks);
  // Core binding (as mpirun does for small jobs): two ranks that wait for each other on one
  // CPU take turns at every message. Lab ranks share this machine's CPUs too.
  // With more ranks than CPUs (not in a lab), consecutive ranks share a CPU in equal blocks
  // (4 ranks on 2 CPUs: 0 0 1 1): where the scheduler placed them, the placement changed
  // from run to run and with it the time of a call by up to 1.9x (4 ranks on 2 CPUs over tcp,
  // each placement pinned, two rounds: 8-512 B broadcast 4.1-4.9 us in blocks, 4.7-5.2 as
  // 0 1 1 0, 6.2-7.7 as 0 1 0 1, the scheduler's choice in a third of the runs; allgather
  // 8 B-4 KiB 17.6-20.0 against 21.1-24.7 unbound; docs/cli.md).
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (options_.bind_to != "none" && sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    const bool shared = static_cast<int>(cpus.size()) < options_.nranks;
    if (shared && lab_) {
      PODNET_INFO(kTool, "podnet run: {} lab ranks on {} CPUs: not binding ranks to cores", options_.nranks,
                  cpus.size());
      cpus.clear();
    }
    if (!cpus.empty() && options_.bind_to == "auto" &&
        std::find(base.begin(), base.end(), "PODNET_TRANSPORT=verbs") != base.end()) {
      if (auto soft = bootstrap::software_rdma_devices(); !soft.empty()) {
        PODNET_INFO(kTool, "podnet run: PODNET_TRANSPORT=verbs on the software RDMA device {}: not binding ranks to "
                    "cores (its protocol work runs on the ranks' CPUs; --bind-to core binds anyway)",
                    fmt::join(soft, ", "));
        cpus.clear();
      }
    }
    if (shared && !cpus.empty()) {
      const int nc = static_cast<int>(cpus.size()), lo = options_.nranks / nc, hi = (options_.nranks + nc - 1) / nc;
      PODNET_INFO(kTool, "podnet run: {} ranks on {} CPUs: consecutive ranks share a CPU ({} each)", options_.nranks,
                  nc, lo == hi ? std::to_string(lo) : fmt::format("{} or {}", lo, hi));
    }
  }
  for (int i = 0; i < options_.nranks; ++i) {
    Rank& r = ranks_[static_cast<size_t>(i)];
    r.index = i;
    if (!cpus.empty()) {  // the i-th CPU, or with fewer CPUs than ranks CPU i*C/N
      const size_t nr = static_cast<size_t>(options_.nranks);
      r.cpu = cpus[static_cast<size_t>(i) * std::min(cpus.size(), nr) / nr];
    }
    r.prefix = options_.prefix ? fmt::format("[{}] ", i) : "";
    r.env = base;
    const std::string idx = std::to_string(i);
    std::string local = idx, local_n = n;
    if (lab_) {
      const LabPlacement::Host& h = lab_->hosts[static_cast<size_t>(lab_->host_of_rank[static_cast<size_t>(i)])];
      local = std::to_string(lab_->local_rank[static_cast<size_t>(i)]);
      local_n = std::to_string(h.ranks);
      r.netns_fd = h.ns_fd;
      r.hostname = h.ns;
      r.env.push_back("PODNET_LAB=" + lab_->lab);
      r.env.push_back(fmt::format("PODNET_LAB_HOST=h{}", h.index));
    }
    for (const std::string& e : {"PODNET_RANK=" + idx, "PODNET_WORLD_SIZE=" + n, "PODNET_LOCAL_RANK=" + local,
                                 "PODNET_LOCAL_WORLD_SIZE=" + local_n, "PODNET_STORE=" + store_address})
      r.env.push_back(e);
  }

  if (options_.timeout_s > 0)
    timeout_deadline_ms_ = now_ms() + static_cast<int64_t>(std::ceil(options_.timeout_s * 1000.0));
  for (Rank& r : ranks_) {
    Status st = spawn(r, *path, signals, null_fd.get());
    if (!st.ok()) {
      size_t started = live_;
      report("cannot start rank {}: {}{}", r.index, st.message(),
             started == 0 ? "" : fmt::format("; stopping the {} already started", plural_ranks(started)));
      begin_stop(SIGTERM, st.code() == Code::kInvalidArgument ? kExitCannotExecute : kExitSetupFailed);
      break;
    }
  }
  supervise(signal_fd.get());
  for (Rank& r : ranks_) {  // pipes held open by a rank's leftover children
    if (r.out.fd.valid()) pump(r, r.out, true);
    if (r.err.fd.valid()) pump(r, r.err, true);
  }
  (*store)->stop();
  return exit_code_;
}

}  // namespace

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signo);
}

int run_job(const JobOptions& options) { return Job(options).run(); }

}  // namespace podnet::tool
