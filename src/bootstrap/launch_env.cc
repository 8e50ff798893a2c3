#include "bootstrap/launch_env.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "bootstrap/socket_util.h"

namespace podnet::bootstrap {
namespace {

// How one launcher names its variables. A launcher is detected when its rank or size
// variable is set; then both must be, and every value must make sense.
struct Launcher {
  std::string_view name;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr: this launcher has none
};

constexpr Launcher kLaunchers[] = {
    {"podnet", "PODNET_RANK", "PODNET_WORLD_SIZE", "PODNET_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr},
};

// Set and non-empty. PODNET_* also count as unset at -1, their documented "detect" value
// (see knobs.def), so a config file that spells out the default does not hide torchrun.
std::optional<std::string> lookup(const EnvFn& env, const char* var) {
  const char* v = env(var);
  if (v == nullptr || *v == '\0') return std::nullopt;
  if (std::string_view(var).starts_with("PODNET_") && std::string_view(v) == "-1") return std::nullopt;
  return std::string(v);
}

Result<int> parse_count(std::string_view launcher, const char* var, const std::string& text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0)
    return Status::InvalidArgument("{} launch: {}=\"{}\" is not a non-negative integer", launcher, var, text);
  return value;
}

Result<LaunchInfo> from_launcher(const EnvFn& env, const Launcher& l) {
  auto rank_text = lookup(env, l.rank);
  auto size_text = lookup(env, l.size);
  if (!rank_text || !size_text) {
    const char* set = rank_text ? l.rank : l.size;
    const char* unset = rank_text ? l.size : l.rank;
    return Status::InvalidArgument("{} launch: {}=\"{}\" is set but {} is not", l.name, set,
                                   rank_text ? *rank_text : *size_text, unset);
  }
  LaunchInfo info;
  info.launcher = std::string(l.name);
  PODNET_ASSIGN_OR_RETURN(info.rank, parse_count(l.name, l.rank, *rank_text));
  PODNET_ASSIGN_OR_RETURN(info.world_size, parse_count(l.name, l.size, *size_text));
  if (info.world_size < 1)
    return Status::InvalidArgument("{} launch: {}=\"{}\" must be at least 1", l.name, l.size, *size_text);
  if (info.rank >= info.world_size)
    return Status::InvalidArgument("{} launch: {}=\"{}\" is not below {}=\"{}\"", l.name, l.rank, *rank_text, l.size,
                                   *size_text);
  std::optional<std::string> local = l.local_rank ? lookup(env, l.local_rank) : std::nullopt;
  if (local) {
    PODNET_ASSIGN_OR_RETURN(info.local_rank, parse_count(l.name, l.local_rank, *local));
    if (info.local_rank >= info.world_size)
      return Status::InvalidArgument("{} launch: {}=\"{}\" is not below {}=\"{}\"", l.name, l.local_rank, *local,
                                     l.size, *size_text);
  }
  if (l.name == "torchrun") {
    auto addr = lookup(env, "MASTER_ADDR");
    auto port = lookup(env, "MASTER_PORT");
    if (addr.has_value() != port.has_value())
      return Status::InvalidArgument("torchrun launch: {} is set but {} is not", addr ? "MASTER_ADDR" : "MASTER_PORT",
                                     addr ? "MASTER_PORT" : "MASTER_ADDR");
    if (addr) {
      info.store = *addr + ":" + *port;
      auto hp = parse_host_port(info.store);
      if (!hp.ok())
        return Status::InvalidArgument("torchrun launch: MASTER_ADDR=\"{}\" MASTER_PORT=\"{}\" is not a store address",
                                       *addr, *port);
    }
  }
  return info;
}

}  // namespace

Result<LaunchInfo> detect_launch(const EnvFn& env) {
  LaunchInfo info;
  info.launcher = "single";
  for (const Launcher& l : kLaunchers) {
    if (!lookup(env, l.rank) && !lookup(env, l.size)) continue;
    PODNET_ASSIGN_OR_RETURN(info, from_launcher(env, l));
    break;
  }
  // PODNET_STORE names the store under any launcher (design.md: it comes first).
  if (auto store = lookup(env, "PODNET_STORE")) {
    auto hp = parse_host_port(*store);
    if (!hp.ok()) return Status::InvalidArgument("PODNET_STORE=\"{}\" is not host:port", *store);
    info.store = *store;
  }
  return info;
}

}  // namespace podnet::bootstrap
