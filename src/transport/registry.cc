#include "transport/registry.h"

#include <mutex>
#include <random>
#include <thread>

namespace podnet::detail {
namespace {
std::string_view access_name(Access a) {
  switch (static_cast<uint32_t>(a)) {
    case 0: return "none";
    case 1: return "remote-read";
    case 2: return "remote-write";
    case 3: return "remote-read|remote-write";
  }
  return "?";
}
}  // namespace

Status check_remote_range(uint64_t key, uint64_t base, uint64_t length, Access granted, uint64_t addr, uint64_t len,
                          Access wanted) {
  if (addr < base || len > length || addr - base > length - len)
    return Status::AccessDenied("[{:#x}, +{}) is outside the region [{:#x}, +{}) of key {:#x}", addr, len, base,
                                length, key);
  if (!has_access(granted, wanted))
    return Status::AccessDenied("region of key {:#x} grants {}, the operation needs {}", key, access_name(granted),
                                access_name(wanted));
  return {};
}

std::shared_ptr<RegionState> MemoryRegistry::find(uint64_t key) {
  std::shared_lock lk(mu_);
  auto it = regions_.find(key);
  return it == regions_.end() ? nullptr : it->second;
}

uint64_t MemoryRegistry::allocated_key(const void* p, size_t len, Access need) {
  if (allocated_count_.load(std::memory_order_relaxed) == 0) return 0;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::shared_lock lk(mu_);
  auto it = allocated_.upper_bound(a);
  if (it == allocated_.begin()) return 0;
  const RegionState& r = *std::prev(it)->second;
  const bool inside = a - std::prev(it)->first <= r.length && len <= r.length - (a - std::prev(it)->first);
  return inside && has_access(r.access, need) ? r.key : 0;
}

void MemoryRegistry::add_observer(RegionObserver* o) {
  std::lock_guard lk(observers_mu_);
  observers_.push_back(o);
}

void MemoryRegistry::remove_observer(RegionObserver* o) {
  std::lock_guard lk(observers_mu_);
  std::erase(observers_, o);
}

Result<std::shared_ptr<RegionState>> MemoryRegistry::add(void* ptr, size_t len, Access access,
                                                         std::unique_ptr<MappedMemory> mapped) {
  if (ptr == nullptr && len != 0) return Status::InvalidArgument("register_memory: null pointer with length {}", len);
  auto r = std::make_shared<RegionState>();
  r->base = static_cast<std::byte*>(ptr);
  r->length = len;
  r->access = access;
  r->owner = owner_;
  r->registry = shared_from_this();
  const bool mappable = mapped != nullptr;
  r->mapped = std::move(mapped);
  std::unique_lock lk(mu_);
  // Keys are unguessable (random high bits) so a stale or forged key is refused, and
  // unique (a counter in the low bits) so a reused key never aliases a new region.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  r->key = (rng() & ~(kMappableKeyBit | 0xFFFFFull)) | (mappable ? kMappableKeyBit : 0) | (++next_ & 0xFFFFF);
  if (r->mapped) {
    MappedHeader& h = r->mapped->header();
    h.key = r->key;
    h.access = static_cast<uint32_t>(access);
  }
  regions_[r->key] = r;
  if (r->mapped) {
    allocated_[reinterpret_cast<uintptr_t>(r->base)] = r.get();
    allocated_count_.store(allocated_.size(), std::memory_order_relaxed);
  }
  return r;
}

void MemoryRegistry::remove(RegionState& region) {
  {
    std::unique_lock lk(mu_);
    if (!region.registered.exchange(false)) return;
    regions_.erase(region.key);
    if (region.mapped) {
      allocated_.erase(reinterpret_cast<uintptr_t>(region.base));
      allocated_count_.store(allocated_.size(), std::memory_order_relaxed);
    }
  }
  if (region.mapped) region.mapped->revoke();  // peers' mappings stop taking copies
  {
    std::lock_guard lk(observers_mu_);
    for (RegionObserver* o : observers_) o->on_remove(region);
  }
  // New operations can no longer find the key; wait out the ones in flight. They are bounded
  // by a single frame's payload, so this is short.
  while (region.inflight.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

Result<RegionPin> MemoryRegistry::acquire(uint64_t key, uint64_t addr, uint64_t len, Access wanted) {
  std::shared_lock lk(mu_);
  auto it = regions_.find(key);
  if (it == regions_.end())
    return Status::AccessDenied("key {:#x} is not registered at the target (wrong key, or the region was deregistered)", key);
  RegionState& r = *it->second;
  PODNET_RETURN_IF_ERROR(
      check_remote_range(key, reinterpret_cast<uint64_t>(r.base), r.length, r.access, addr, len, wanted));
  r.inflight.fetch_add(1, std::memory_order_acquire);
  return RegionPin(it->second);
}

}  // namespace podnet::detail
