// Detects rank, world size, local rank and the store address from the launcher's
// environment, in the order design.md lists: podnet (PODNET_RANK, PODNET_WORLD_SIZE,
// PODNET_LOCAL_RANK, PODNET_STORE), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), Open MPI
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK), PMI (PMI_RANK,
// PMI_SIZE).
#pragma once

#include <podnet/status.h>

#include <functional>
#include <string>

namespace podnet::bootstrap {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string store;     // "host:port", empty when the launcher gave none
  std::string launcher;  // "podnet", "torchrun", "slurm", "openmpi", "pmi" or "single"
};

using EnvFn = std::function<const char*(const char*)>;
// A partial or inconsistent set (rank >= size, a non-number) is an error quoting the value.
Result<LaunchInfo> detect_launch(const EnvFn& env);

}  // namespace podnet::bootstrap
