#include <podnet/xfer.h>

#include <cstring>

#include "transport/registry.h"

namespace podnet {
namespace {
constexpr uint32_t kKeyMagic = 0x4B524450;  // "PDRK"
constexpr size_t kKeyBlobSize = 40;
}  // namespace

std::string RemoteKey::serialize() const {
  std::string out(kKeyBlobSize, '\0');
  uint32_t acc = static_cast<uint32_t>(access);
  std::memcpy(out.data(), &kKeyMagic, 4);
  std::memcpy(out.data() + 4, &acc, 4);
  std::memcpy(out.data() + 8, &addr, 8);
  std::memcpy(out.data() + 16, &length, 8);
  std::memcpy(out.data() + 24, &key, 8);
  std::memcpy(out.data() + 32, &owner, 8);
  return out;
}

Result<RemoteKey> RemoteKey::deserialize(std::string_view blob) {
  if (blob.size() != kKeyBlobSize)
    return Status::InvalidArgument("remote key blob of {} bytes (expected {})", blob.size(), kKeyBlobSize);
  uint32_t magic, acc;
  std::memcpy(&magic, blob.data(), 4);
  if (magic != kKeyMagic) return Status::InvalidArgument("remote key blob has bad magic {:#x}", magic);
  std::memcpy(&acc, blob.data() + 4, 4);
  if (acc > 3) return Status::InvalidArgument("remote key blob has bad access bits {:#x}", acc);
  RemoteKey k;
  k.access = static_cast<Access>(acc);
  std::memcpy(&k.addr, blob.data() + 8, 8);
  std::memcpy(&k.length, blob.data() + 16, 8);
  std::memcpy(&k.key, blob.data() + 24, 8);
  std::memcpy(&k.owner, blob.data() + 32, 8);
  return k;
}

Result<RemoteKey> exchange_remote_key(Endpoint& ep, const RemoteKey& mine, uint64_t tag,
                                      std::chrono::nanoseconds timeout) {
  std::string out = mine.serialize(), in(out.size(), '\0');
  Request r = ep.recv(in.data(), in.size(), tag);
  PODNET_RETURN_IF_ERROR(ep.send(out.data(), out.size(), tag).wait(timeout).with_context("sending the remote key"));
  PODNET_RETURN_IF_ERROR(r.wait(timeout).with_context("receiving the peer's remote key"));
  return RemoteKey::deserialize(in);
}

MemoryRegion::MemoryRegion(std::shared_ptr<detail::RegionState> state) : state_(std::move(state)) {}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    deregister();
    state_ = std::move(o.state_);
  }
  return *this;
}

MemoryRegion::~MemoryRegion() { deregister(); }

std::byte* MemoryRegion::data() const noexcept { return state_ ? state_->base : nullptr; }
size_t MemoryRegion::size() const noexcept { return state_ ? state_->length : 0; }
Access MemoryRegion::access() const noexcept { return state_ ? state_->access : Access::kNone; }

RemoteKey MemoryRegion::remote_key() const {
  RemoteKey k;
  if (!state_) return k;
  k.addr = reinterpret_cast<uint64_t>(state_->base);
  k.length = state_->length;
  k.key = state_->key;
  k.owner = state_->owner;
  k.access = state_->access;
  return k;
}

void MemoryRegion::deregister() {
  if (state_ && state_->registry) state_->registry->remove(*state_);
  state_.reset();
}

}  // namespace podnet
