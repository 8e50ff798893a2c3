// The TCP transport: a listener per rail (interface), the peers (TcpEndpoint) by context id,
// and housekeeping (connect retries, heartbeats, silent-peer detection) driven by the
// progress engine.
//
// Rails: create() takes one IPv4 address or a comma-separated list, one per rail; the
// transport's address is then "ip1:port1,ip2:port2". To a peer with P rails it opens
// `streams` connections per rail (at most 64 in all), stream i to rail i % P, and stripes
// transfers round-robin over the streams, so consecutive chunks alternate between rails.
#pragma once

#include <podnet/status.h>

#include <algorithm>
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

inline constexpr size_t kMaxRails = 16;   // listeners per transport, rails per peer
inline constexpr size_t kMaxStreams = 64;  // connections per peer in all (the hello's limit)

// PODNET_TCP_EXCHANGE_EAGER_MAX=0 (auto) through loopback: there a rendezvous round trip cost
// more than the rare copy of an exchange step's message that arrives before its receive
// (2-rank alltoall of 512 KiB 74-111 -> 43-59 us; docs/performance.md "Eager exchange steps").
inline constexpr uint64_t kExchangeEagerLoopback = 512 << 10;

struct TcpOptions {
  int streams = 4;
  uint64_t stripe_min = 256 << 10;
  uint64_t chunk = 512 << 10;
  bool chunk_mss = true;  // chunks + header are whole segments (TcpEndpoint::chunk_size)
  uint64_t eager_max = 64 << 10;
  // The collectives' exchange steps (TransportEndpoint::send_exchange) go eagerly up to the
  // larger of this and eager_max; 0: kExchangeEagerLoopback to a peer reached through the
  // loopback device, else eager_max (PODNET_TCP_EXCHANGE_EAGER_MAX).
  uint64_t exchange_eager_max = 0;
  uint64_t sndbuf = 0, rcvbuf = 0;
  int heartbeat_ms = 1000;
  int peer_timeout_ms = 15000;
  int connect_timeout_ms = 30000;
  enum class Zerocopy { kAuto, kOn, kOff } zerocopy = Zerocopy::kAuto;
  uint64_t zerocopy_min = 64 << 10;
  // A write_notify's acknowledgement may wait this long for the notified thread's next
  // frame to the initiator, to leave with it (0: sent at once).
  int ack_delay_us = 200;
  // Congestion control per connection: "auto" sets reno on connections whose peer is on
  // this host (routed through the loopback device) and leaves the others at the system
  // default; "system" never sets one; any other value is set on every connection
  // (PODNET_TCP_CONGESTION).
  std::string congestion = "auto";
};

// The largest exchange step (TransportEndpoint::send_exchange) that goes eagerly to a peer
// reached through the loopback device or not: never less than a plain send's eager_max.
inline uint64_t exchange_eager_limit(const TcpOptions& o, bool through_loopback) {
  const uint64_t limit = o.exchange_eager_max != 0 ? o.exchange_eager_max
                         : through_loopback        ? kExchangeEagerLoopback
                                                   : o.eager_max;
  return std::max(limit, o.eager_max);
}

class TcpTransport final : public detail::Transport {
 public:
  // `bind_ips`: "ip" or "ip1,ip2,..." (one listener each, all on `port`; 0: a free port each).
  static Result<std::unique_ptr<TcpTransport>> create(detail::ProgressEngine& engine, detail::MemoryRegistry& registry,
                                                      uint64_t ctx_id, int rank, const std::string& bind_ips,
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
  uint64_t ctx_id() const { return ctx_id_; }
  std::string hello_body(int stream, const TcpEndpoint* ep) const;
  Status on_hello(const std::shared_ptr<Connection>& c, const HelloBody& hello);
  void track(const std::shared_ptr<Connection>& c);   // keep alive until retired
  void retire(const std::shared_ptr<Connection>& c);  // closed; freed later
  void housekeeping();
  // A connection holds a deferred frame (Connection::post_deferred); flush_deferred() sends
  // what every such connection holds (the engine calls it before anyone waits or blocks).
  void defer(const std::shared_ptr<Connection>& c);
  void flush_deferred();

 private:
  class Listener;
  TcpTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
               const TcpOptions& options);
  Status listen_on(const std::string& ip, uint16_t port);
  void accept_ready(int fd);
  std::shared_ptr<TcpEndpoint> endpoint_for(uint64_t peer_id, int rank, const std::string& listen);

  detail::ProgressEngine& engine_;
  detail::MemoryRegistry& registry_;
  const uint64_t ctx_id_;
  const int rank_;
  const TcpOptions options_;
  std::vector<std::unique_ptr<Listener>> listeners_;  // one per rail
  std::string listen_;                                 // "ip:port[,ip:port...]"

  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<TcpEndpoint>> endpoints_;
  std::vector<std::shared_ptr<Connection>> live_;
  std::deque<std::pair<int64_t, std::shared_ptr<Connection>>> graveyard_;
  bool shut_down_ = false;
  std::mutex deferred_mu_;
  std::vector<std::weak_ptr<Connection>> deferred_;
};

}  // namespace podnet::tcp
