// Which way of moving a block between two ranks of this host costs less, measured once per
// arena at set-up (PODNET_SHM_PREFER=probe, the default).
//
// A hand-over through the segment is two copies that move cache lines between cores: the
// owner writes the block into its buffer (taking back the lines a reader holds from the
// previous call), then a peer copies it out (fetching lines the owner modified). A
// cross-memory copy (process_vm_readv/writev) is a system call that pins the other side's
// pages and copies once; in a benchmark loop its source and destination lines stay in the
// caches of the core that copies. Which one wins depends on the host, not on podnet: on one
// 2-vCPU VM (2026-12-02) the 2-rank arena allgather of 128 KiB took 5.0-6.1 us against 6.6-7.0
// for "cma"; on another (2026-12-03) 12.2-12.4 against 4.4, where this probe read 6.2-9.1 us
// for a 64 KiB hand-over (writer and reader together) and 2.4-2.9 for the cross-memory read.
//
// The probe: ranks 0 and 1 take turns through a word in the header page. Each round rank 1
// copies 64 KiB into its first slot buffer; rank 0 copies them out, then reads 64 KiB of
// rank 1's second slot buffer (which nobody writes meanwhile) with one process_vm_readv.
// The best of kRounds rounds of each (the first round pays the page faults) go to rank 0,
// which decides and tells every rank. A probe that does not finish within kBudgetNs (a
// rank descheduled on a crowded host) leaves the built-in choice (arena). For the probe the
// two ranks bind themselves to two different CPUs (and restore their affinity after):
// unbound, on a host with more ranks than CPUs, they often took turns on one CPU, whose
// cache made the hand-over look cheap (4 ranks on 2 CPUs: 2.1 us for 64 KiB, against 6.2-9.1
// between two CPUs).
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "coll/arena.h"
#include "coll/comm_impl.h"

namespace podnet::detail {
namespace {
constexpr size_t kProbeBytes = 64 * 1024;
constexpr int kRounds = 8;
constexpr int64_t kBudgetNs = 20'000'000;
constexpr size_t kTurnOffset = 1024;  // in the header page, past the segment header
// Message tags of the set-up exchange (Arena::establish uses 0-4).
constexpr uint32_t kTagProbe = 5, kTagWrite = 6, kTagAgree = 7;

std::atomic<uint32_t>* turn_word(std::byte* base) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base + kTurnOffset);
}

// Binds the calling thread to `cpu` for the probe and restores its affinity when destroyed.
class BindFor {
 public:
  explicit BindFor(int cpu) {
    if (cpu < 0 || sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    bound_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~BindFor() {
    if (bound_) (void)sched_setaffinity(0, sizeof saved_, &saved_);
  }
  BindFor(const BindFor&) = delete;
  BindFor& operator=(const BindFor&) = delete;

 private:
  cpu_set_t saved_{};
  bool bound_ = false;
};

// The first CPU this thread may run on other than `not_this`; failing that, the first other
// online CPU (`podnet run` binds consecutive ranks to one CPU when there are more ranks than
// CPUs: ranks 0 and 1 then share one, and the probe would time a hand-over within a CPU);
// -1 if none.
int allowed_cpu(int not_this) {
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s) && c != not_this) return c;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < online && c < CPU_SETSIZE; ++c)
    if (c != not_this) return c;
  return -1;
}

// Waits until *w == want; false when the deadline passes first.
bool await_turn(std::atomic<uint32_t>* w, uint32_t want, int64_t deadline) {
  for (uint32_t i = 1;; ++i) {
    if (w->load(std::memory_order_acquire) == want) return true;
    if (i % 64 == 0) {
      if (now_ns() > deadline) return false;
      sched_yield();
    }
  }
}
}  // namespace

Arena::CopyCosts Arena::probe_reader(int64_t deadline) {
  const size_t b = std::min(kProbeBytes, slot_bytes_);
  std::vector<std::byte> scratch(b, std::byte{0});
  const std::byte* handed = slot(1, 0, b);
  // Rank 1's second slot buffer, at the address where rank 1 maps it.
  const uint64_t remote = base_of(1) + static_cast<uint64_t>(slot(1, kLargeEvery, b) - base_);
  std::atomic<uint32_t>* turn = turn_word(base_);
  int64_t read = INT64_MAX, cma = INT64_MAX;
  for (uint32_t i = 0; i < kRounds; ++i) {
    if (!await_turn(turn, 2 * i + 1, deadline)) break;
    int64_t t0 = now_ns();
    std::memcpy(scratch.data(), handed, b);
    int64_t t1 = now_ns();
    read = std::min(read, t1 - t0);
    iovec local{scratch.data(), b}, rem{reinterpret_cast<void*>(remote), b};
    const ssize_t got = process_vm_readv(pid_of(1), &local, 1, &rem, 1, 0);
    const int64_t t2 = now_ns();
    if (got == static_cast<ssize_t>(b)) cma = std::min(cma, t2 - t1);
    turn->store(2 * i + 2, std::memory_order_release);
  }
  CopyCosts costs;
  costs.bytes = b;
  costs.read_ns = read == INT64_MAX ? 0 : read;
  costs.cma_ns = cma == INT64_MAX ? 0 : cma;
  return costs;
}

int64_t Arena::probe_writer(int64_t deadline) {
  const size_t b = std::min(kProbeBytes, slot_bytes_);
  std::vector<std::byte> src(b, std::byte{0x5a});
  std::byte* mine = slot(me_, 0, b);
  std::atomic<uint32_t>* turn = turn_word(base_);
  int64_t write = INT64_MAX;
  for (uint32_t i = 0; i < kRounds; ++i) {
    if (!await_turn(turn, 2 * i, deadline)) break;
    const int64_t t0 = now_ns();
    std::memcpy(mine, src.data(), b);
    write = std::min(write, now_ns() - t0);
    turn->store(2 * i + 1, std::memory_order_release);
  }
  return write == INT64_MAX ? 0 : write;
}

Status Arena::choose_copies(Call& c) {
  // Rank 0 decides; rank 1 helps it measure; every rank learns the answer in one agreement
  // (AND of the bits: the others offer 1).
  uint32_t cheap = 1;
  if (me_ == 0) {
    const std::string& prefer = config().shm_prefer;
    // {probe or not, the CPU rank 0 binds to}
    int32_t probe[2] = {cma_ && prefer != "arena" && prefer != "cma" && slot_bytes_ >= 4096 ? 1 : 0, allowed_cpu(-1)};
    if (cma_) PODNET_RETURN_IF_ERROR(c.send(1, probe, sizeof probe, kTagProbe));
    cheap = cma_ && prefer == "cma" ? 1 : 0;
    if (probe[0]) {
      CopyCosts costs;
      {
        BindFor bind(probe[1]);
        costs = probe_reader(now_ns() + kBudgetNs);
      }
      PODNET_RETURN_IF_ERROR(c.recv(1, &costs.write_ns, sizeof costs.write_ns, kTagWrite));
      const bool done = costs.read_ns > 0 && costs.cma_ns > 0 && costs.write_ns > 0;
      cheap = done && costs.cma_ns < costs.write_ns + costs.read_ns ? 1 : 0;
      PODNET_INFO(kColl,
                  "arena probe, {} bytes: hand-over {} ns (rank 1 writes {}, rank 0 reads {}), cross-memory read {} ns: "
                  "{}",
                  costs.bytes, costs.write_ns + costs.read_ns, costs.write_ns, costs.read_ns, costs.cma_ns,
                  !done ? "did not finish in time, the arena's crossovers" : cheap ? "cross-memory copies are cheaper"
                                                                                  : "hand-overs are cheaper");
    }
  } else if (me_ == 1 && cma_) {
    int32_t probe[2] = {0, -1};
    PODNET_RETURN_IF_ERROR(c.recv(0, probe, sizeof probe, kTagProbe));
    if (probe[0]) {
      int64_t w = 0;
      {
        BindFor bind(allowed_cpu(probe[1]));
        w = probe_writer(now_ns() + kBudgetNs);
      }
      PODNET_RETURN_IF_ERROR(c.send(0, &w, sizeof w, kTagWrite));
    }
  }
  // Every rank, so that all use the same tables.
  PODNET_RETURN_IF_ERROR(agree_bits(c, cheap, kTagAgree));
  cma_cheap_ = cma_ && cheap != 0;
  return {};
}

}  // namespace podnet::detail
