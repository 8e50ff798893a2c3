// The RDMA verbs transport: one device/port/GID per context, RC queue pairs per peer set up
// over a small TCP socket (the out-of-band channel: each side's hello carries its QP number,
// PSN, GID, MTU and receive depth; the socket stays open so that a peer process that exits is
// noticed at once). Completions are polled by the progress engine (this is its Poller) and a
// shared completion channel, in the engine's epoll set, wakes a sleeping engine.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/transport.h"
#include "transport/verbs/device.h"
#include "transport/verbs/memory.h"
#include "transport/verbs/verbs.h"

namespace podnet::verbs {

class VerbsEndpoint;

class VerbsTransport final : public detail::Transport, public detail::Poller {
 public:
  static Result<std::unique_ptr<VerbsTransport>> create(detail::ProgressEngine& engine,
                                                        detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
                                                        const VerbsOptions& options);
  ~VerbsTransport() override;

  std::string_view name() const noexcept override { return "verbs"; }
  detail::Capabilities caps() const noexcept override;
  std::string address() const override;
  Result<std::shared_ptr<detail::TransportEndpoint>> connect(uint64_t peer_id, int peer_rank,
                                                             std::string_view peer_address) override;
  void shutdown() override;

  int poll() override;
  bool arm() override;
  void disarm() override {}

  detail::ProgressEngine& engine() { return engine_; }
  detail::MemoryRegistry& registry() { return registry_; }
  MrCache& mrs() { return *mrs_; }
  Device& device() { return *device_; }
  const VerbsOptions& options() const { return options_; }
  uint64_t ctx_id() const { return ctx_id_; }
  int rank() const { return rank_; }
  size_t chunk() const { return chunk_; }
  ibv_comp_channel* channel() { return channel_; }
  double retry_budget_ms() const;

 private:
  class Listener;
  class Channel;
  class Oob;
  VerbsTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
                 const VerbsOptions& options);
  void accept_ready();
  void on_oob(Oob* oob, uint32_t events);
  Status start_oob(const std::shared_ptr<VerbsEndpoint>& ep, const VerbsAddress& peer);
  std::shared_ptr<VerbsEndpoint> endpoint_for(uint64_t peer_id, int rank, const std::string& host);
  // Every endpoint, for poll() and arm() on every spin turn and for the housekeeping: no lock
  // and no reference count. Endpoints are never removed (endpoints_ owns them until the
  // transport dies), and every version of the list stays alive as long (a poller may still
  // be reading an older one).
  using EndpointList = std::vector<VerbsEndpoint*>;
  const EndpointList& list() const { return *list_.load(std::memory_order_acquire); }
  void housekeeping();
  void revoke(uint64_t key);

  detail::ProgressEngine& engine_;
  detail::MemoryRegistry& registry_;
  const uint64_t ctx_id_;
  const int rank_;
  const VerbsOptions options_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<MrCache> mrs_;
  ibv_comp_channel* channel_ = nullptr;
  size_t chunk_ = 0;
  int listen_fd_ = -1;
  uint16_t listen_port_ = 0;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Channel> channel_handler_;

  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<VerbsEndpoint>> endpoints_;
  std::atomic<const EndpointList*> list_{nullptr};
  std::vector<std::unique_ptr<const EndpointList>> lists_;  // with mu_; list_ is the last
  std::vector<std::unique_ptr<Oob>> oobs_;  // live until the transport dies (epoll may still report them)
  bool shut_down_ = false;
};

}  // namespace podnet::verbs
