// The public Endpoint: validates arguments against the local region and the remote key,
// then hands the operation to the transport chosen for this peer.
#pragma once

#include <podnet/xfer.h>

#include <memory>

#include "transport/progress.h"
#include "transport/transport.h"

namespace podnet::detail {

class EndpointImpl final : public Endpoint {
 public:
  EndpointImpl(std::shared_ptr<TransportEndpoint> te, std::string_view transport, ProgressEngine* engine)
      : te_(std::move(te)), transport_(transport), engine_(engine) {}

  int peer_rank() const noexcept override { return te_->peer_rank(); }
  std::string peer_name() const override { return te_->peer_name(); }
  std::string_view transport() const noexcept override { return transport_; }
  Request write(const MemoryRegion& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                size_t len) override;
  Request write_notify(const MemoryRegion& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
                       size_t len, uint64_t imm) override;
  Request read(const MemoryRegion& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
               size_t len) override;
  Request send(const void* buf, size_t len, uint64_t tag) override;
  // Internal (the collectives): TransportEndpoint::send_whole and send_exchange.
  Request send_whole(const void* buf, size_t len, uint64_t tag);
  Request send_exchange(const void* buf, size_t len, uint64_t tag);
  Request recv(void* buf, size_t capacity, uint64_t tag, uint64_t tag_mask) override;
  Request recv_notify() override;
  size_t cancel_recvs(uint64_t tag, uint64_t tag_mask) override { return te_->cancel_recvs(tag, tag_mask); }
  Status health() const override { return te_->health(); }
  Status wait_connected(int64_t deadline_ns) { return te_->wait_connected(deadline_ns); }
  // Internal (the collectives' arena): TransportEndpoint::copy_mapped_now.
  bool copy_mapped_now(uint64_t key, uint64_t addr, void* local, size_t len, bool read) {
    return te_->copy_mapped_now(key, addr, local, len, read);
  }
  std::shared_ptr<const std::byte> view_mapped(uint64_t key, uint64_t addr, size_t len) {
    return te_->view_mapped(key, addr, len);
  }

 private:
  Request rejected(const char* op, const Status& why);
  Request send_as(const void* buf, size_t len, uint64_t tag, bool exchange);
  Status check_one_sided(const char* op, const MemoryRegion& local, size_t local_off, const RemoteKey& remote,
                         uint64_t remote_off, size_t len, Access needed) const;

  std::shared_ptr<TransportEndpoint> te_;
  std::string_view transport_;
  ProgressEngine* engine_;
};

}  // namespace podnet::detail
