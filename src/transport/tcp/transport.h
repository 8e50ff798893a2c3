// The TCP transport: a listener, the peers (TcpEndpoint) by context id, and housekeeping
// (connect retries, heartbeats, silent-peer detection) driven by the progress engine.
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/tcp/wire.h"
#include "transport/transport.h"

namespace podnet::tcp {

class Connection;
class TcpEndpoint;

struct TcpOptions {
  int streams = 4;
  uint64_t stripe_min = 256 << 10;
  uint64_t chunk = 512 << 10;
  uint64_t eager_max = 64 << 10;
  uint64_t sndbuf = 0, rcvbuf = 0;
  int heartbeat_ms = 1000;
  int peer_timeout_ms = 15000;
  int connect_timeout_ms = 30000;
  enum class Zerocopy { kAuto, kOn, kOff } zerocopy = Zerocopy::kAuto;
  uint64_t zerocopy_min = 64 << 10;
};

class TcpTransport : public detail::Transport {
 public:
  static Result<std::unique_ptr<TcpTransport>> create(detail::ProgressEngine& engine, detail::MemoryRegistry& registry,
                                                      uint64_t ctx_id, int rank, const std::string& bind_ip,
                                                      uint16_t port, const TcpOptions& options);
  ~TcpTransport() override;

  std::string_view name() const noexcept override { return "tcp"; }
  detail::Capabilities caps() const noexcept override { return {}; }
  std::string address() const override { return listen_; }
  Result<std::shared_ptr<detail::TransportEndpoint>> connect(uint64_t peer_id, int peer_rank,
                                                             std::string_view peer_address) override;
  void shutdown() override;

  // For connections and endpoints.
  detail::ProgressEngine& engine() { return engine_; }
  detail::MemoryRegistry& registry() { return registry_; }
  const TcpOptions& options() const { return options_; }
  std::string hello_body(int stream, TcpEndpoint* ep) const;
  Status on_hello(const std::shared_ptr<Connection>& c, const HelloBody& hello);
  void track(const std::shared_ptr<Connection>& c);   // keep alive until retired
  void retire(const std::shared_ptr<Connection>& c);  // closed; freed later
  void housekeeping();

 private:
  class Listener;
  TcpTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
               const TcpOptions& options);
  void accept_ready();
  std::shared_ptr<TcpEndpoint> endpoint_for(uint64_t peer_id, int rank, const std::string& listen);

  detail::ProgressEngine& engine_;
  detail::MemoryRegistry& registry_;
  const uint64_t ctx_id_;
  const int rank_;
  const TcpOptions options_;
  int listen_fd_ = -1;
  std::string listen_;
  std::unique_ptr<Listener> listener_;

  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<TcpEndpoint>> endpoints_;
  std::vector<std::shared_ptr<Connection>> live_;
  std::deque<std::pair<int64_t, std::shared_ptr<Connection>>> graveyard_;
  bool shut_down_ = false;
};

}  // namespace podnet::tcp
