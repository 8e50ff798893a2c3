// Logging reads its environment once per process, so every scenario runs the log_writer
// helper as a child with an environment of its own and inspects what it wrote.
#include "base/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace podnet::log {
namespace {

namespace fs = std::filesystem;

std::string hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "podnet_log_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "mkdtemp: " << strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs log_writer with exactly `env` as its environment and its stderr sent to
  // dir_/stderr.txt; returns its pid.
  pid_t run_writer(const std::map<std::string, std::string>& env, const char* mode = nullptr) {
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string prog = PODNET_LOG_WRITER;
    std::string mode_arg = mode ? mode : "";
    std::vector<char*> argv = {prog.data()};
    if (mode) argv.push_back(mode_arg.data());
    argv.push_back(nullptr);

    const std::string err_path = (dir_ / "stderr.txt").string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, prog.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "posix_spawn " << prog << ": " << strerror(rc);
    if (rc != 0) return -1;
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "log_writer status " << status;
    return pid;
  }

  std::vector<std::string> stderr_lines() const { return read_lines(dir_ / "stderr.txt"); }

  fs::path dir_;
};

std::string regex_escape(const std::string& text) {
  static const std::regex kSpecial(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, kSpecial, R"(\$&)");
}

// "[12:34:56.123456 rank 3 myhost pid 4242] ERROR net: error line 1"
std::regex line_regex(int rank, const std::string& host, pid_t pid, const std::string& level,
                      const std::string& subsys, const std::string& message) {
  return std::regex("^\\[[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} rank " + std::to_string(rank) + " " +
                    regex_escape(host) + " pid " + std::to_string(pid) + "\\] " + level + " " + subsys +
                    ": " + message + "$");
}

TEST_F(LogTest, FileLinesStartWithRankHostAndPid) {
  const pid_t pid = run_writer({{"PODNET_LOG_FILE", (dir_ / "podnet.%h.%p.%r.log").string()},
                                {"PODNET_RANK", "3"},
                                {"PODNET_LOG", "info"}});
  ASSERT_GT(pid, 0);
  const std::string host = hostname();
  const fs::path file = dir_ / ("podnet." + host + "." + std::to_string(pid) + ".3.log");
  ASSERT_TRUE(fs::exists(file)) << file << " missing; %h %p %r not expanded?";
  const std::vector<std::string> lines = read_lines(file);
  ASSERT_EQ(lines.size(), 3u);  // info level: error, warn, info; not debug or trace
  EXPECT_TRUE(std::regex_match(lines[0], line_regex(3, host, pid, "ERROR", "net", "error line 1")))
      << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], line_regex(3, host, pid, "WARN", "base", "warn line 2")))
      << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], line_regex(3, host, pid, "INFO", "coll", "info line 3")))
      << lines[2];
  EXPECT_TRUE(stderr_lines().empty());  // everything went to the file
}

TEST_F(LogTest, DefaultsToWarnOnStderrWithUnknownRank) {
  const pid_t pid = run_writer({});
  ASSERT_GT(pid, 0);
  const std::vector<std::string> lines = stderr_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(std::regex_match(lines[0], line_regex(-1, hostname(), pid, "ERROR", "net", "error line 1")))
      << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], line_regex(-1, hostname(), pid, "WARN", "base", "warn line 2")))
      << lines[1];
}

TEST_F(LogTest, SubsystemFilterAndTraceLevel) {
  const pid_t pid = run_writer({{"PODNET_LOG", "trace"}, {"PODNET_LOG_SUBSYS", "boot,xfer"}});
  ASSERT_GT(pid, 0);
  const std::vector<std::string> lines = stderr_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(std::regex_match(lines[0], line_regex(-1, hostname(), pid, "DEBUG", "boot", "debug line 4")))
      << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], line_regex(-1, hostname(), pid, "TRACE", "xfer", "trace line 5")))
      << lines[1];
}

TEST_F(LogTest, BadLevelWarnsAndKeepsWarn) {
  const pid_t pid = run_writer({{"PODNET_LOG", "loud"}});
  ASSERT_GT(pid, 0);
  const std::vector<std::string> lines = stderr_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("PODNET_LOG='loud'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("ERROR net: error line 1"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("WARN base: warn line 2"), std::string::npos) << lines[2];
}

TEST_F(LogTest, SetRankChangesPrefixAndReopensRankFile) {
  const pid_t pid = run_writer({{"PODNET_LOG_FILE", (dir_ / "r%r.log").string()}}, "set-rank");
  ASSERT_GT(pid, 0);
  const std::vector<std::string> before = read_lines(dir_ / "r-1.log");
  ASSERT_EQ(before.size(), 2u);
  EXPECT_TRUE(std::regex_match(before[0], line_regex(-1, hostname(), pid, "ERROR", "net", "error line 1")))
      << before[0];
  const std::vector<std::string> after = read_lines(dir_ / "r5.log");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_TRUE(std::regex_match(after[0], line_regex(5, hostname(), pid, "ERROR", "tool", "after set_rank")))
      << after[0];
}

TEST(LogNamesTest, LevelAndSubsystemNames) {
  EXPECT_EQ(level_name(Level::kError), "ERROR");
  EXPECT_EQ(level_name(Level::kTrace), "TRACE");
  EXPECT_EQ(subsys_name(Subsys::kNet), "net");
  EXPECT_EQ(subsys_name(Subsys::kTool), "tool");
}

}  // namespace
}  // namespace podnet::log
