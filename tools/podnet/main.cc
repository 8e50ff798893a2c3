// podnet: the command-line toolkit. Subcommands are registered in one place, below.
#include <podnet/features.h>

#include <cstdio>

#include "commands.h"

namespace podnet::tool {
ExitCode g_exit_code = 0;
void set_exit_code(ExitCode code) { g_exit_code = code; }
}  // namespace podnet::tool

int main(int argc, char** argv) {
  CLI::App app{"podnet: pod networking for AI clusters: transfer engine, collectives, benchmarks, qualification"};
  app.set_version_flag("--version", std::string("podnet ") + PODNET_VERSION_STRING);
  app.require_subcommand(1);
  podnet::tool::add_run_command(app);
  podnet::tool::add_doctor_command(app);
  podnet::tool::add_bench_command(app);
  podnet::tool::add_tune_command(app);
  podnet::tool::add_lab_command(app);
  CLI11_PARSE(app, argc, argv);
  return podnet::tool::g_exit_code;
}
