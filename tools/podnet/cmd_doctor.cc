// placeholder: being written
#include "commands.h"
namespace podnet::tool { void add_doctor_command(CLI::App&) {} }
