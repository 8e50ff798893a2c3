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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as docs/cli.md says (CLI11's
    // own codes, 105 for a value out of range or 108 for excluded options, mean nothing to
    // a launcher script).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return podnet::tool::g_exit_code;
}
