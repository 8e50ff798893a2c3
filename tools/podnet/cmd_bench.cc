// placeholder: being written
#include "commands.h"
namespace podnet::tool { void add_bench_command(CLI::App&) {} }
