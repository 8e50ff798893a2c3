// podnet doctor: what this host and this environment look like to podnet.
//   podnet doctor            system summary and every PODNET_* knob
//   podnet doctor --config   only the knobs: value, where it came from, default, help
//   --json                   the same as one JSON object, for machines
// A knob with a bad value makes the command fail with exit code 2 and the error, which quotes
// the value, so a launcher script can run `podnet doctor --config` as a preflight check.
#include <podnet/features.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/config.h"
#include "commands.h"
#include "transport/shm/ptracer.h"

namespace podnet::tool {
namespace {

struct DoctorOptions {
  bool config_only = false;
  bool json = false;
};

struct SystemInfo {
  std::string hostname;
  std::string kernel;   // "Linux 6.1.0-18-amd64 x86_64"
  long cpus_online = 0;
  int cpus_usable = 0;  // in this process's affinity mask (what taskset / cgroups leave us)
  bool io_uring = false;
  int yama_scope = -1;  // /proc/sys/kernel/yama/ptrace_scope; -1: no Yama
};

SystemInfo probe_system() {
  SystemInfo s;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) s.hostname = host.data();
  utsname u{};
  if (uname(&u) == 0) s.kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  s.cpus_online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  s.cpus_usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  s.io_uring = PODNET_HAVE_URING != 0;
  s.yama_scope = shm::yama_ptrace_scope();
  return s;
}

// Empty strings are shown as "" so a blank cell is never ambiguous.
std::string display(const std::string& text) { return text.empty() ? "\"\"" : text; }

// Sizes in the form they are usually written (262144 -> 256K), so VALUE reads like DEFAULT.
std::string display_value(const KnobInfo& k) {
  if (k.type != "size") return display(k.value);
  uint64_t bytes = std::stoull(k.value);
  if (bytes == 0) return "0";
  static constexpr const char* kSuffixes[] = {"", "K", "M", "G", "T"};
  size_t i = 0;
  while (i + 1 < std::size(kSuffixes) && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + kSuffixes[i];
}

void print_system(const SystemInfo& s) {
  fmt::print("podnet {}\n", PODNET_VERSION_STRING);
  fmt::print("  host      {}\n", s.hostname);
  fmt::print("  kernel    {}\n", s.kernel);
  fmt::print("  cpus      {} online, {} usable by this process\n", s.cpus_online, s.cpus_usable);
  fmt::print("  io_uring  {}\n", s.io_uring ? "built in" : "not built in");
  // Cross-memory attach between sibling ranks (shm's single copy) under Yama (docs/shm.md).
  const char* what = s.yama_scope < 0    ? "no Yama: ranks of one user may attach"
                     : s.yama_scope == 0 ? "scope 0: ranks of one user may attach"
                     : s.yama_scope == 1 ? "scope 1: ranks attach as PODNET_SHM_PTRACER declares"
                                         : "scope 2+: no cross-memory attach, shm copies through its rings";
  fmt::print("  ptrace    {}\n\n", what);
}

void print_knob_table(const std::vector<KnobInfo>& knobs) {
  const std::array<std::string, 6> header = {"VARIABLE", "TYPE", "VALUE", "SOURCE", "DEFAULT", "HELP"};
  std::array<size_t, 5> width{};  // HELP is last and not padded
  for (size_t c = 0; c < width.size(); ++c) width[c] = header[c].size();
  for (const KnobInfo& k : knobs) {
    width[0] = std::max(width[0], k.env.size());
    width[1] = std::max(width[1], k.type.size());
    width[2] = std::max(width[2], display_value(k).size());
    width[3] = std::max(width[3], knob_source_name(k.source).size());
    width[4] = std::max(width[4], display(k.default_value).size());
  }
  auto row = [&](std::string_view env, std::string_view type, std::string_view value,
                 std::string_view source, std::string_view def, std::string_view help) {
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", env, width[0], type, width[1], value,
               width[2], source, width[3], def, width[4], help);
  };
  row(header[0], header[1], header[2], header[3], header[4], header[5]);
  for (const KnobInfo& k : knobs)
    row(k.env, k.type, display_value(k), knob_source_name(k.source), display(k.default_value), k.help);
}

// Numbers and booleans as JSON numbers and booleans; the effective value text came from the
// typed member, so it always converts.
nlohmann::ordered_json typed_value(const KnobInfo& k) {
  if (k.type == "bool") return k.value == "true";
  if (k.type == "int") return std::stoll(k.value);
  if (k.type == "size") return std::stoull(k.value);
  return k.value;
}

nlohmann::ordered_json knobs_json(const std::vector<KnobInfo>& knobs) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const KnobInfo& k : knobs) {
    out.push_back({{"env", k.env},
                   {"member", k.member},
                   {"type", k.type},
                   {"value", typed_value(k)},
                   {"source", std::string(knob_source_name(k.source))},
                   {"default", k.default_value},
                   {"help", k.help}});
  }
  return out;
}

nlohmann::ordered_json system_json(const SystemInfo& s) {
  return {{"version", PODNET_VERSION_STRING}, {"hostname", s.hostname},       {"kernel", s.kernel},
          {"cpus_online", s.cpus_online},     {"cpus_usable", s.cpus_usable}, {"io_uring", s.io_uring},
          {"yama_ptrace_scope", s.yama_scope}};
}

int run_doctor(const DoctorOptions& opt) {
  const Status st = load_config();
  const bool with_system = !opt.config_only;
  if (opt.json) {
    nlohmann::ordered_json out;
    if (with_system) out["system"] = system_json(probe_system());
    if (st.ok()) {
      out["knobs"] = knobs_json(describe_config());
    } else {
      out["error"] = st.to_string();
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    if (with_system) print_system(probe_system());
    if (st.ok()) print_knob_table(describe_config());
  }
  if (!st.ok()) {
    fmt::print(stderr, "podnet doctor: {}\nfix or unset the variable and run again\n", st.to_string());
    return 2;
  }
  return 0;
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto opt = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "check this host and the PODNET_* settings: value, source, default; exit code 2 on a bad value");
  cmd->footer(
      "Every PODNET_* variable is listed with its effective value and where it came from\n"
      "(default or environment). Run it where the job will run, with the job's environment:\n"
      "  podnet doctor                      system summary and settings\n"
      "  podnet doctor --config --json      settings only, as JSON");
  cmd->add_flag("--config", opt->config_only,
                "print only the PODNET_* settings: variable, type, value, source, default, help");
  cmd->add_flag("--json", opt->json, "print one JSON object instead of tables");
  cmd->callback([opt] { set_exit_code(run_doctor(*opt)); });
}

}  // namespace podnet::tool
