// Each podnet subcommand lives in its own file and registers itself here (one line each in
// main.cc, no static constructors). A command's callback returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace podnet::tool {

// Set by a subcommand's callback; main returns it.
using ExitCode = int;
void set_exit_code(ExitCode code);

void add_run_command(CLI::App& app);     // cmd_run.cc: podnet run -n N -- CMD...
void add_doctor_command(CLI::App& app);  // cmd_doctor.cc: podnet doctor --config
void add_bench_command(CLI::App& app);   // cmd_bench*.cc: podnet bench p2p ...
void add_tune_command(CLI::App& app);    // cmd_tune.cc: podnet tune -o FILE
void add_lab_command(CLI::App& app);     // cmd_lab.cc: podnet lab up|down|status|list|exec|link|rate

}  // namespace podnet::tool
