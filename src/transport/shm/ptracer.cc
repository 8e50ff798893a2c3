#include "transport/shm/ptracer.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/log.h"

namespace podnet::shm {

int yama_ptrace_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(f >> scope)) return -1;
  return scope;
}

Result<unsigned long> ptracer_for(const std::string& mode, int scope, pid_t parent) {
  if (mode != "parent" && mode != "any" && mode != "off")
    return Status::InvalidArgument("PODNET_SHM_PTRACER='{}': expected parent, any or off", mode);
  if (scope != 1 || mode == "off") return 0UL;
  if (mode == "any") return static_cast<unsigned long>(PR_SET_PTRACER_ANY);
  if (parent <= 1) return 0UL;
  return static_cast<unsigned long>(parent);
}

Status declare_ptracer(const std::string& mode, bool wanted) {
  const int scope = wanted ? yama_ptrace_scope() : -1;
  const pid_t parent = getppid();
  PODNET_ASSIGN_OR_RETURN(unsigned long who, ptracer_for(mode, scope, parent));
  if (who == 0) {
    if (scope == 1)
      PODNET_INFO(kNet, "shm: Yama ptrace_scope 1 and PODNET_SHM_PTRACER={}{}: no ptracer declared", mode,
                  mode == "parent" ? " with no parent left" : "");
    return {};
  }
  if (prctl(PR_SET_PTRACER, who, 0, 0, 0) != 0) {
    // Not fatal: the per-peer probes find out and fall back to copies through the rings.
    PODNET_WARN(kNet, "shm: prctl(PR_SET_PTRACER) for PODNET_SHM_PTRACER={}: {}", mode, std::strerror(errno));
    return {};
  }
  if (mode == "any")
    PODNET_INFO(kNet, "shm: Yama ptrace_scope 1: any process of this user may attach (PODNET_SHM_PTRACER=any)");
  else
    PODNET_INFO(kNet, "shm: Yama ptrace_scope 1: processes under pid {} (the launcher) may attach", parent);
  return {};
}

void explain_cma_refusal(pid_t pid, int err, const std::string& peer) {
  static std::atomic<bool> warned{false};
  if (err == EPERM && yama_ptrace_scope() == 1 && !warned.exchange(true)) {
    PODNET_WARN(kNet,
                "shm: cross-memory attach to {} (pid {}) refused under Yama ptrace_scope 1: large transfers "
                "with it are copied through the rings (twice). Ranks that do not share a parent need "
                "PODNET_SHM_PTRACER=any",
                peer, pid);
    return;
  }
  PODNET_DEBUG(kNet, "shm: no cross-memory attach to {} (pid {}): {}", peer, pid,
               err == EPROTO ? "unexpected data" : std::strerror(err));
}

}  // namespace podnet::shm
