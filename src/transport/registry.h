// The memory registry: registered regions by key, and the target-side check of every
// one-sided operation (key, bounds, access rights). Shared by all transports of a context.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <podnet/xfer.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "transport/mapped_memory.h"

namespace podnet::detail {

class MemoryRegistry;

// Set in the key of every region podnet allocated (Context::allocate_memory), whose memory a
// peer on the same host may map: the shm transport asks to map only those keys.
inline constexpr uint64_t kMappableKeyBit = 1ull << 20;

class RegionState {
 public:
  std::byte* base = nullptr;
  size_t length = 0;
  Access access = Access::kNone;
  uint64_t key = 0;
  uint64_t owner = 0;
  std::shared_ptr<MemoryRegistry> registry;  // keeps the registry alive past its context
  std::atomic<int> inflight{0};     // remote operations touching the memory right now
  std::atomic<bool> registered{true};
  // One transport's registration of the region with its device (verbs: the ibv_mr), read
  // without a lock on every operation. Only the transport that claimed the slot
  // (MemoryRegistry::claim_device_slot) reads or writes it.
  mutable std::atomic<void*> device_handle{nullptr};
  // The memory itself when podnet allocated it (set before the key is handed out); unmapped
  // when the state goes.
  std::unique_ptr<MappedMemory> mapped;
};

// Holds a region pinned (it cannot finish deregistering) while a remote operation uses it.
class RegionPin {
 public:
  RegionPin() = default;
  explicit RegionPin(std::shared_ptr<RegionState> r) : region_(std::move(r)) {}
  RegionPin(RegionPin&& o) noexcept : region_(std::move(o.region_)) {}
  RegionPin& operator=(RegionPin&& o) noexcept {
    release();
    region_ = std::move(o.region_);
    return *this;
  }
  ~RegionPin() { release(); }
  void release() {
    if (region_) region_->inflight.fetch_sub(1, std::memory_order_release);
    region_.reset();
  }

 private:
  std::shared_ptr<RegionState> region_;
};

// Told when a region is deregistered, before remove() returns (so before the memory can be
// freed): a transport that registers memory with hardware (verbs) drops its registration of
// the region here. Called outside the registry's lock; must not call back into the registry.
class RegionObserver {
 public:
  virtual ~RegionObserver() = default;
  virtual void on_remove(RegionState& region) = 0;
};

// The target-side check of [addr, addr+len) against a region; the error says exactly what
// was wrong (bounds, rights). Shared by acquire() and by transports whose hardware checks.
Status check_remote_range(uint64_t key, uint64_t base, uint64_t length, Access granted, uint64_t addr, uint64_t len,
                          Access wanted);

class MemoryRegistry : public std::enable_shared_from_this<MemoryRegistry> {
 public:
  explicit MemoryRegistry(uint64_t owner_id) : owner_(owner_id) {}
  // `mapped`: podnet allocated the memory (the key gets kMappableKeyBit).
  Result<std::shared_ptr<RegionState>> add(void* ptr, size_t len, Access access,
                                           std::unique_ptr<MappedMemory> mapped = nullptr);
  // Removes the key (and revokes peers' mappings of allocated memory), then waits until no
  // remote operation uses the region.
  void remove(RegionState& region);
  // Target side: validates a remote operation on [addr, addr+len) and pins the region.
  // The error says exactly what was wrong (unknown key, bounds, rights).
  Result<RegionPin> acquire(uint64_t key, uint64_t addr, uint64_t len, Access wanted);
  uint64_t owner() const noexcept { return owner_; }
  // The registered region of `key`, or nullptr (no pin: for transports whose hardware
  // enforces access once the region is registered with it).
  std::shared_ptr<RegionState> find(uint64_t key);
  // The key of the allocated region (Context::allocate_memory) that holds [p, p+len) and
  // grants `need`, or 0: a peer that mapped that region can copy a message out of it (or,
  // with kRemoteWrite, into it) itself (shm rendezvous).
  uint64_t allocated_key(const void* p, size_t len, Access need = Access::kNone);
  void add_observer(RegionObserver* o);
  void remove_observer(RegionObserver* o);  // waits for a running on_remove() to return
  // RegionState::device_handle belongs to the first transport that asks (true for it);
  // release it when that transport goes away.
  bool claim_device_slot(const void* who) noexcept {
    const void* owner = nullptr;
    return device_slot_owner_.compare_exchange_strong(owner, who) || owner == who;
  }
  void release_device_slot(const void* who) noexcept {
    const void* owner = who;
    device_slot_owner_.compare_exchange_strong(owner, nullptr);
  }

 private:
  uint64_t owner_;
  std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<RegionState>> regions_;
  std::map<uintptr_t, RegionState*> allocated_;  // registered allocated regions by base address
  std::atomic<size_t> allocated_count_{0};        // allocated_.size(), read without the lock
  uint64_t next_ = 0;
  std::mutex observers_mu_;  // held while observers run
  std::vector<RegionObserver*> observers_;
  std::atomic<const void*> device_slot_owner_{nullptr};
};

}  // namespace podnet::detail
