// Yama's ptrace restriction and cross-memory attach.
//
// With kernel.yama.ptrace_scope = 1 (Ubuntu's default, and many clusters'), a process may read
// or write another's memory (process_vm_readv/writev, pidfd_getfd) only when it descends from
// that process, or descends from the process that one declared its ptracer with
// prctl(PR_SET_PTRACER). Ranks are siblings, children of one launcher (podnet run, mpirun,
// torchrun, slurmstepd), so without a declaration every probe between them fails and large
// shm transfers lose their single copy. PODNET_SHM_PTRACER says what to declare:
//   parent  the launcher (this process's parent): its other children, the sibling ranks, and
//           their descendants may attach; nobody else gains anything (default)
//   any     every process of this user (PR_SET_PTRACER_ANY, what Open MPI and UCX declare):
//           for ranks that do not share a parent
//   off     declare nothing
// Scope 0 needs nothing, and with 2 (administrators only) or 3 (nobody) no declaration helps:
// the knob acts only at scope 1.
#pragma once

#include <podnet/status.h>
#include <sys/types.h>

#include <string>

namespace podnet::shm {

// /proc/sys/kernel/yama/ptrace_scope: 0..3, or -1 when the kernel has no Yama.
int yama_ptrace_scope();

// The prctl(PR_SET_PTRACER) argument that `mode` asks for at Yama scope `scope`, for a process
// whose parent is `parent`: a pid, PR_SET_PTRACER_ANY, or 0 for no declaration (scope not 1,
// mode off, or no parent left to name: an orphan's parent is init, naming which would let
// every process in). An error for a mode other than parent, any or off.
Result<unsigned long> ptracer_for(const std::string& mode, int scope, pid_t parent);

// Applies PODNET_SHM_PTRACER to this process (at shm transport creation) and logs what it did.
// With `wanted` false (no cross-memory attach, no mappings) it only checks the mode.
Status declare_ptracer(const std::string& mode, bool wanted = true);

// A probe of `pid`'s memory failed with `err` (errno; EPROTO: unexpected data): under Yama
// scope 1 a refusal is explained once per process as a warning that names the knob, else
// logged at debug level.
void explain_cma_refusal(pid_t pid, int err, const std::string& peer);

}  // namespace podnet::shm
