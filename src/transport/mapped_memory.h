// Memory podnet allocates for the user (Context::allocate_memory): a memfd mapped shared,
// with one header page before the data that describes the region to a peer on the same host
// that maps the same file. The shm transport maps a peer's allocated regions (it takes the
// memfd with pidfd_getfd) and turns one-sided operations on them into a memcpy
// (docs/shm.md, "Regions both sides map").
//
// Deregistration sets `revoked` in the header; a peer checks it before every copy. The owner
// unmaps when the region's state goes: a copy that started before the flag was set lands in
// pages that only the peer's mapping still holds, never in memory the owner reuses.
#pragma once

#include <podnet/status.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace podnet::detail {

struct MappedHeader {
  static constexpr uint64_t kMagic = 0x524d54454e444f50;  // "PODNETMR"
  uint64_t magic = 0;
  uint64_t key = 0;        // the region's key (set before the key can leave the process)
  uint64_t data_addr = 0;  // where the data is mapped in the owner: the remote key's addr
  uint64_t length = 0;     // data bytes
  uint32_t access = 0;     // Access granted to peers
  std::atomic<uint32_t> revoked{0};  // set at deregistration
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// The owner's allocation.
class MappedMemory {
 public:
  static Result<std::unique_ptr<MappedMemory>> create(size_t len);
  ~MappedMemory();
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;

  std::byte* data() const noexcept { return data_; }
  size_t length() const noexcept { return length_; }
  int fd() const noexcept { return fd_; }  // open while the region lives (peers take it)
  MappedHeader& header() noexcept { return *header_; }
  void revoke() noexcept { header_->revoked.store(1, std::memory_order_seq_cst); }

 private:
  MappedMemory() = default;
  int fd_ = -1;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  MappedHeader* header_ = nullptr;
  std::byte* data_ = nullptr;
  size_t length_ = 0;
};

// A peer's allocated region mapped into this process.
class PeerMapping {
 public:
  // Maps the memfd `fd` (not closed) and checks that its header describes `key`; the data is
  // mapped read-only when the region grants no remote write.
  static Result<std::shared_ptr<PeerMapping>> map(int fd, uint64_t key);
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  uint64_t key() const noexcept { return key_; }
  uint64_t data_addr() const noexcept { return data_addr_; }
  uint64_t length() const noexcept { return length_; }
  uint32_t access() const noexcept { return access_; }
  bool revoked() const noexcept { return header_->revoked.load(std::memory_order_seq_cst) != 0; }
  // The local address of the owner's address `addr` (checked against the region by the caller).
  std::byte* at(uint64_t addr) const noexcept { return data_ + (addr - data_addr_); }

 private:
  PeerMapping() = default;
  const MappedHeader* header_ = nullptr;  // the header page, mapped read-only
  std::byte* data_ = nullptr;
  size_t data_bytes_ = 0;  // mapped (page-rounded)
  uint64_t key_ = 0, data_addr_ = 0, length_ = 0;
  uint32_t access_ = 0;
};

}  // namespace podnet::detail
