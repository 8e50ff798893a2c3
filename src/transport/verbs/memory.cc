#include "transport/verbs/memory.h"

#include <cerrno>
#include <cstring>

#include "transport/verbs/device.h"

namespace podnet::verbs {

int access_flags(Access a) {
  int f = IBV_ACCESS_LOCAL_WRITE;  // local access is always allowed (a read lands here)
  if (has_access(a, Access::kRemoteRead)) f |= IBV_ACCESS_REMOTE_READ;
  if (has_access(a, Access::kRemoteWrite)) f |= IBV_ACCESS_REMOTE_WRITE;
  return f;
}

MrCache::MrCache(Device& device, detail::MemoryRegistry& registry, std::function<void(uint64_t)> on_revoke)
    : device_(device), registry_(registry), on_revoke_(std::move(on_revoke)) {
  registry_.add_observer(this);
  slot_ = registry_.claim_device_slot(this);
}

MrCache::~MrCache() {
  registry_.remove_observer(this);
  std::lock_guard lk(mu_);
  for (auto& [r, mr] : mrs_) {
    if (slot_) r->device_handle.store(nullptr, std::memory_order_release);
    if (mr) ibv_dereg_mr(mr);
  }
  mrs_.clear();
  if (slot_) registry_.release_device_slot(this);
}

Result<ibv_mr*> MrCache::get_slow(const detail::RegionState& region) {
  std::lock_guard lk(mu_);
  auto it = mrs_.find(&region);
  if (it != mrs_.end()) return it->second;
  // Checked under mu_: on_remove() takes mu_ too, so a region deregistered meanwhile is
  // either refused here or its fresh MR is dropped by on_remove().
  if (!region.registered.load(std::memory_order_acquire))
    return Status::AccessDenied("the region was deregistered");
  ibv_mr* mr = nullptr;
  if (region.length > 0) {
    mr = ibv_reg_mr(device_.pd, region.base, region.length, access_flags(region.access));
    if (mr == nullptr)
      return Status::Unavailable("{}: ibv_reg_mr of {} bytes: {} (check `ulimit -l`: registered memory is pinned)",
                                 device_.name, region.length, std::strerror(errno));
  }
  mrs_.emplace(&region, mr);
  if (slot_ && mr != nullptr)
    region.device_handle.store(mr, std::memory_order_release);
  return mr;
}

Result<ibv_mr*> MrCache::register_buffer(const void* buf, size_t len, int access) {
  ibv_mr* mr = ibv_reg_mr(device_.pd, const_cast<void*>(buf), len, access);
  if (mr == nullptr)
    return Status::Unavailable("{}: ibv_reg_mr of a {}-byte message buffer: {} (check `ulimit -l`)", device_.name,
                               len, std::strerror(errno));
  return mr;
}

void MrCache::on_remove(detail::RegionState& region) {
  bool had_remote = false;
  {
    std::lock_guard lk(mu_);
    auto it = mrs_.find(&region);
    if (it == mrs_.end()) return;
    if (slot_) region.device_handle.store(nullptr, std::memory_order_release);
    if (it->second) {
      had_remote = region.access != Access::kNone;
      ibv_dereg_mr(it->second);  // from here on the device refuses the rkey
    }
    mrs_.erase(it);
  }
  if (had_remote && on_revoke_) on_revoke_(region.key);
}

}  // namespace podnet::verbs
