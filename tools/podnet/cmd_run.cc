// placeholder: being written
#include "commands.h"
namespace podnet::tool { void add_run_command(CLI::App&) {} }
