#include "xfer/endpoint_impl.h"

#include "transport/registry.h"
#include "transport/request.h"

namespace podnet::detail {

Request EndpointImpl::rejected(const char* op, const Status& why) {
  auto r = make_request(engine_, op, 0);
  r->complete(Status(why.code(), fmt::format("{} to {}: {}", op, te_->peer_name(), why.message())));
  return Request(std::move(r));
}

Status EndpointImpl::check_one_sided(const char*, const MemoryRegion& local, size_t local_off,
                                     const RemoteKey& remote, uint64_t remote_off, size_t len, Access needed) const {
  if (!local.valid()) return Status::InvalidArgument("local region is not registered");
  if (local_off > local.size() || len > local.size() - local_off)
    return Status::InvalidArgument("local range [{}, +{}) exceeds the local region of {} bytes", local_off, len,
                                   local.size());
  // Checked here for a clear early error; the target checks again and is the authority.
  if (remote_off > remote.length || len > remote.length - remote_off)
    return Status::InvalidArgument("remote range [{}, +{}) exceeds the remote region of {} bytes", remote_off, len,
                                   remote.length);
  if (!has_access(remote.access, needed))
    return Status::AccessDenied("the remote key does not grant {}",
                                needed == Access::kRemoteRead ? "remote-read" : "remote-write");
  return {};
}

Request EndpointImpl::write(const MemoryRegion& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                            size_t len) {
  if (Status st = check_one_sided("write", local, local_off, remote, remote_off, len, Access::kRemoteWrite); !st.ok())
    return rejected("write", st);
  return Request(te_->write(*local.state(), local_off, remote, remote_off, len, nullptr));
}

Request EndpointImpl::write_notify(const MemoryRegion& local, size_t local_off, const RemoteKey& remote,
                                   uint64_t remote_off, size_t len, uint64_t imm) {
  if (Status st = check_one_sided("write_notify", local, local_off, remote, remote_off, len, Access::kRemoteWrite);
      !st.ok())
    return rejected("write_notify", st);
  return Request(te_->write(*local.state(), local_off, remote, remote_off, len, &imm));
}

Request EndpointImpl::read(const MemoryRegion& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                           size_t len) {
  if (Status st = check_one_sided("read", local, local_off, remote, remote_off, len, Access::kRemoteRead); !st.ok())
    return rejected("read", st);
  return Request(te_->read(*local.state(), local_off, remote, remote_off, len));
}

Request EndpointImpl::send(const void* buf, size_t len, uint64_t tag) { return send_as(buf, len, tag, false); }

Request EndpointImpl::send_exchange(const void* buf, size_t len, uint64_t tag) { return send_as(buf, len, tag, true); }

Request EndpointImpl::send_as(const void* buf, size_t len, uint64_t tag, bool exchange) {
  if (buf == nullptr && len > 0) return rejected("send", Status::InvalidArgument("null buffer of {} bytes", len));
  uint64_t seq = 0;
  auto state = exchange ? te_->send_exchange(buf, len, tag, &seq) : te_->send_or_done(buf, len, tag, &seq);
  if (!state) return Request::completed_at_post(len, tag, seq);
  return Request(std::move(state));
}

Request EndpointImpl::send_whole(const void* buf, size_t len, uint64_t tag) {
  if (buf == nullptr && len > 0) return rejected("send", Status::InvalidArgument("null buffer of {} bytes", len));
  return Request(te_->send_whole(buf, len, tag));
}

Request EndpointImpl::recv(void* buf, size_t capacity, uint64_t tag, uint64_t tag_mask) {
  if (buf == nullptr && capacity > 0)
    return rejected("recv", Status::InvalidArgument("null buffer of {} bytes", capacity));
  return Request(te_->recv(buf, capacity, tag, tag_mask));
}

Request EndpointImpl::recv_notify() { return Request(te_->recv_notify()); }

}  // namespace podnet::detail
