// Runs system tools (ip, tc) the safe way: fork + exec of an argument vector, never a shell,
// so no name or value can be read as shell syntax.
//
// Blocking: run_tool() blocks until the tool exits (it reads both pipes while it waits, so a
// chatty tool cannot deadlock it). Thread-safety: safe to call from several threads.
#pragma once

#include <podnet/status.h>

#include <string>
#include <vector>

namespace podnet::tool {

struct ToolOutput {
  int exit_code = 0;  // 128 + signal when the tool was killed
  std::string out, err;
};

// Finds `name` in PATH, then in /usr/sbin and /sbin (root's tools are often missing from a
// user's PATH). kUnavailable names the Debian package when `package` is given.
Result<std::string> find_tool(const std::string& name, const std::string& package = {});

// Runs argv (argv[0] is looked up with find_tool), stdin from /dev/null, and returns its exit
// code and output. An error only when it could not be run at all.
Result<ToolOutput> run_tool(const std::vector<std::string>& argv);

// run_tool() that also fails when the tool exits non-zero: the message quotes the command
// line and the tool's stderr ("ip -n podnet-lab-sw link add ...: RTNETLINK answers: File exists").
Result<std::string> run_tool_checked(const std::vector<std::string>& argv);

// "ip -n ns link set dev eth0 up": for messages only (arguments with spaces are quoted).
std::string command_line(const std::vector<std::string>& argv);

}  // namespace podnet::tool
