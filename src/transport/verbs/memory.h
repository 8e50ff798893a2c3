// Memory registration with the device. Every podnet region a verbs operation touches is
// registered once (ibv_reg_mr, on first use) with exactly the rights podnet granted: local
// write always, remote read / remote write only when the region grants them. The NIC then
// refuses a stale or forged rkey, an out-of-bounds range or a missing right by itself.
// Deregistering the podnet region deregisters the MR before MemoryRegion::deregister()
// returns (a RegionObserver), so the device never touches freed memory.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <infiniband/verbs.h>

#include <functional>
#include <mutex>
#include <unordered_map>

#include "transport/registry.h"

namespace podnet::verbs {

struct Device;

class MrCache : public detail::RegionObserver {
 public:
  // `on_revoke(key)` runs after a region that peers may know the rkey of was deregistered.
  MrCache(Device& device, detail::MemoryRegistry& registry, std::function<void(uint64_t)> on_revoke);
  ~MrCache() override;
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // The region's MR, registered on first use; nullptr for an empty region. Fails when the
  // region was deregistered or the device refuses (memlock limit: `ulimit -l`). Once
  // registered, found without a lock (the region's device slot; 117 instructions a call
  // under the map's mutex in the soft-RoCE write ping-pong's profile).
  Result<ibv_mr*> get(const detail::RegionState& region) {
    if (slot_)
      if (void* mr = region.device_handle.load(std::memory_order_acquire)) return static_cast<ibv_mr*>(mr);
    return get_slow(region);
  }
  // A registration of a user buffer for one rendezvous transfer (deregister with ibv_dereg_mr).
  Result<ibv_mr*> register_buffer(const void* buf, size_t len, int access);

  void on_remove(detail::RegionState& region) override;

 private:
  Result<ibv_mr*> get_slow(const detail::RegionState& region);

  Device& device_;
  detail::MemoryRegistry& registry_;
  std::function<void(uint64_t)> on_revoke_;
  bool slot_ = false;  // this cache owns the regions' device slot (the registry's first)
  std::mutex mu_;
  std::unordered_map<const detail::RegionState*, ibv_mr*> mrs_;
};

int access_flags(Access a);

}  // namespace podnet::verbs
