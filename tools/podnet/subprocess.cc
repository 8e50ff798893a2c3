#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string_view>

extern char** environ;

namespace podnet::tool {
namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<std::string> find_tool(const std::string& name, const std::string& package) {
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return Status::Unavailable("{}: not an executable file", name);
  }
  const char* env_path = ::getenv("PATH");
  std::string path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  path += ":/usr/sbin:/sbin";
  std::string_view rest = path;
  while (true) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (!dir.empty()) {
      dir += '/';
      dir += name;
      if (executable(dir)) return dir;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (package.empty()) return Status::Unavailable("{}: command not found", name);
  return Status::Unavailable("{}: command not found (Debian package {})", name, package);
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

Result<ToolOutput> run_tool(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("run_tool: empty command");
  PODNET_ASSIGN_OR_RETURN(std::string path, find_tool(argv[0]));
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Unavailable("pipe2: {}", strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    close_fd(out_pipe[0]);
    close_fd(out_pipe[1]);
    return Status::Unavailable("pipe2: {}", strerror(e));
  }
  // Built before fork: the child may only make system calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) close_fd(*fd);
    return Status::Unavailable("fork: {}", strerror(e));
  }
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close_range(3, UINT_MAX, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(path.c_str(), args.data(), environ);
    ::_exit(127);
  }
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  ToolOutput result;
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      char buf[16384];
      ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0)
        sinks[i]->append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        close_fd(fds[i]);
    }
  }
  close_fd(fds[0]);
  close_fd(fds[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Result<std::string> run_tool_checked(const std::vector<std::string>& argv) {
  PODNET_ASSIGN_OR_RETURN(ToolOutput r, run_tool(argv));
  if (r.exit_code == 0) return std::move(r.out);
  std::string why = r.err;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  if (why.empty()) why = fmt::format("exit code {}", r.exit_code);
  return Status::Unavailable("{}: {}", command_line(argv), why);
}

}  // namespace podnet::tool
