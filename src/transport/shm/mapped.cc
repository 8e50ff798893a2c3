// One-sided operations on regions the peer allocated (Context::allocate_memory): learn the
// mapping once (kMapReq / kMapResp, pidfd_getfd), then copy with memcpy (endpoint.h).
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/copy.h"
#include "base/log.h"
#include "transport/shm/endpoint.h"
#include "transport/shm/transport.h"

namespace podnet::shm {
namespace {

std::atomic<uint64_t> g_own_key_copies{0};

// One copy between this process's memory and its mapping of a peer's region.
void copy_through(const detail::PeerMapping& m, uint64_t addr, void* local, size_t len, bool read) {
  if (read)
    copy_to_output(local, m.at(addr), len);
  else
    copy_to_output(m.at(addr), local, len);
}

}  // namespace

std::shared_ptr<detail::PeerMapping> ShmEndpoint::mapping_for(Channel& ch, uint64_t key) {
  // pidfd_getfd needs the ptrace permission that pushing with process_vm_writev needs.
  if (!transport_->options().map || !ch.ready() || !ch.cma_push()) return nullptr;
  {
    std::lock_guard lk(map_mu_);
    auto [it, fresh] = maps_.try_emplace(key);
    if (!fresh) return it->second;
  }
  OutOp op;
  op.hdr.type = Rec::kMapReq;
  op.hdr.key = key;
  post(ch, std::move(op));
  return nullptr;
}

bool ShmEndpoint::peer_exited() {
  const int64_t now = now_ns();
  if (now - exit_checked_ns_.load(std::memory_order_relaxed) < 1'000'000) return false;
  exit_checked_ns_.store(now, std::memory_order_relaxed);
  pollfd p{pidfd_.load(), POLLIN, 0};
  return p.fd >= 0 && ::poll(&p, 1, 0) == 1;  // a pidfd turns readable when the process exits
}

ShmEndpoint::Req ShmEndpoint::copy_mapped(Channel& ch, const char* name, uint64_t key, uint64_t addr,
                                          std::byte* local, size_t len, bool read) {
  if ((key & detail::kMappableKeyBit) == 0) return nullptr;
  const std::shared_ptr<detail::PeerMapping> m = mapping_for(ch, key);
  if (!m) return nullptr;
  Status why;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) why = failed_;
    else if (Status closed = peer_memory_closed(); !closed.ok())
      why = closed;
    else if (!ops_.empty()) return nullptr;  // an earlier operation is still on the ring: keep the order
  }
  if (why.ok() && peer_exited()) {
    fail(Status::PeerFailed("the process exited (its pidfd said so before a copy into its mapped memory)"));
    why = health();
  }
  auto req = new_request(name);
  req->bytes = len;
  if (why.ok() && m->revoked()) {
    {
      std::lock_guard lk(map_mu_);
      maps_[m->key()].reset();  // the key is dead for good
    }
    why = Status::AccessDenied("key {:#x} is not registered at the target (the region was deregistered)", m->key());
  }
  if (why.ok())
    why = detail::check_remote_range(m->key(), m->data_addr(), m->length(), static_cast<Access>(m->access()), addr,
                                     len, read ? Access::kRemoteRead : Access::kRemoteWrite);
  if (!why.ok()) {
    req->complete(op_failure(*req, why));
    return req;
  }
  {
    PeerCopy copy(*this);
    if (!copy.status().ok()) {
      req->complete(op_failure(*req, copy.status()));
      return req;
    }
    copy_through(*m, addr, local, len, read);
  }
  req->complete(Status::Ok());
  return req;
}

ShmEndpoint::CopyPlan ShmEndpoint::plan_copy(const Channel& ch, const detail::RegionState& local, uint64_t remote_key,
                                             size_t len, bool read) const {
  // The lengths first: a small transfer (the mapped memcpy's) reads no more than them.
  CopyPlan p;
  p.split = transport_->split(len) && ch.ready() && ch.cma_push();
  // A read's target writes into the initiator's region: its mapping there is writable only
  // where the region grants remote writes (PeerMapping::map).
  p.own_key = len > transport_->options().eager_max && (local.key & detail::kMappableKeyBit) != 0 &&
              (!read || has_access(local.access, Access::kRemoteWrite)) && transport_->options().map && ch.ready() &&
              ch.cma() && ch.cma_push();
  p.shared = p.split && p.own_key && (remote_key & detail::kMappableKeyBit) != 0;
  return p;
}

void ShmEndpoint::attach_own_key(OutOp& op, uint64_t local_key) {
  op.hdr.flags |= kOwnKey;
  op.owned.assign(reinterpret_cast<const char*>(&local_key), sizeof local_key);
  op.len = op.owned.size();
}

bool ShmEndpoint::copy_with_initiator(const RecHdr& h, std::byte* local, size_t len) {
  if ((h.flags & kOwnKey) == 0 || h.plen != sizeof(uint64_t)) return false;
  uint64_t key;
  std::memcpy(&key, payload(&h), sizeof key);
  // The initiator's own buffer of its own operation: a write's source needs no rights; a
  // read's destination must be writable through the mapping.
  const bool into = h.type == Rec::kRead;
  const auto m = usable_mapping(key, h.aux, len, into ? Access::kRemoteWrite : Access::kNone);
  if (!m) return false;
  copy_through(*m, h.aux, local, len, /*read=*/!into);
  g_own_key_copies.fetch_add(1, std::memory_order_relaxed);
  return true;
}

uint64_t ShmEndpoint::own_key_copies() noexcept { return g_own_key_copies.load(std::memory_order_relaxed); }

std::shared_ptr<detail::PeerMapping> ShmEndpoint::usable_mapping(uint64_t key, uint64_t addr, size_t len, Access need) {
  if ((key & detail::kMappableKeyBit) == 0) return nullptr;
  Channel* ch = out_raw_.load(std::memory_order_acquire);
  if (ch == nullptr || failed_flag_.load(std::memory_order_acquire) || !peer_memory_closed().ok()) return nullptr;
  std::shared_ptr<detail::PeerMapping> m = mapping_for(*ch, key);
  if (!m || m->revoked() ||
      !detail::check_remote_range(m->key(), m->data_addr(), m->length(), static_cast<Access>(m->access()), addr, len,
                                  need)
           .ok())
    return nullptr;
  return m;
}

bool ShmEndpoint::copy_mapped_now(uint64_t key, uint64_t addr, void* local, size_t len, bool read) {
  const auto m = usable_mapping(key, addr, len, read ? Access::kRemoteRead : Access::kRemoteWrite);
  if (!m) return false;
  copy_through(*m, addr, local, len, read);
  return true;
}

std::shared_ptr<const std::byte> ShmEndpoint::view_mapped(uint64_t key, uint64_t addr, size_t len) {
  auto m = usable_mapping(key, addr, len, Access::kRemoteRead);
  if (!m) return nullptr;
  const std::byte* p = m->at(addr);
  return std::shared_ptr<const std::byte>(std::move(m), p);  // keeps the mapping alive
}

void ShmEndpoint::drop_revoked_mappings() {
  std::vector<std::shared_ptr<detail::PeerMapping>> gone;  // unmapped after the lock
  std::lock_guard lk(map_mu_);
  for (auto it = maps_.begin(); it != maps_.end();) {
    // A revoked key never comes back (keys are unique): forget it, so that the table does
    // not grow with every region a long job allocates and frees.
    if (it->second && it->second->revoked()) {
      gone.push_back(std::move(it->second));
      it = maps_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmEndpoint::on_map_request(const RecHdr& h) {
  Channel* ch = in_raw_.load(std::memory_order_acquire);
  if (!ch) return;
  OutOp op;
  op.hdr.type = Rec::kMapResp;
  op.hdr.key = h.key;
  auto region = transport_->registry().find(h.key);
  if (region && region->mapped) {
    op.hdr.aux = static_cast<uint64_t>(region->mapped->fd());
  } else {
    Status st = Status::Unavailable("key {:#x} is not a region this side allocated", h.key);
    op.hdr.code = static_cast<uint16_t>(st.code());
    op.owned = st.message();
    op.len = op.owned.size();
  }
  post(*ch, std::move(op));
}

void ShmEndpoint::on_map_reply(const RecHdr& h) {
  std::shared_ptr<detail::PeerMapping> mapping;
  std::string why;
  if (h.code != 0) {
    why = std::string(reinterpret_cast<const char*>(payload(&h)), h.plen);
  } else {
    std::lock_guard lk(map_mu_);
    if (pidfd_.load() < 0) pidfd_.store(static_cast<int>(syscall(SYS_pidfd_open, peer_pid_.load(), 0)));
    const int pidfd = pidfd_.load();
    int fd = pidfd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, static_cast<int>(h.aux), 0));
    if (fd < 0) {
      why = fmt::format("pidfd_getfd: {}", std::strerror(errno));
    } else {
      auto m = detail::PeerMapping::map(fd, h.key);
      close(fd);
      if (m.ok()) mapping = std::move(m).value();
      else why = m.status().message();
    }
  }
  if (mapping)
    PODNET_INFO(kNet, "mapped the region of key {:#x} of {} ({} bytes): operations on it are copies here",
                h.key, peer_name(), mapping->length());
  else
    PODNET_INFO(kNet, "region of key {:#x} of {} stays on the ring: {}", h.key, peer_name(), why);
  std::lock_guard lk(map_mu_);
  if (!failed_flag_.load(std::memory_order_acquire)) maps_[h.key] = std::move(mapping);
}

}  // namespace podnet::shm
