// The shared-memory transport: for peers on the same host (same kernel, same network
// namespace). A listening Unix socket in the abstract namespace receives the peers'
// channels; one eventfd doorbell wakes this context's progress engine when a peer writes a
// ring while it sleeps. The transport is the engine's Poller: every spin turn checks the
// rings of every peer.
#pragma once

#include <podnet/status.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace podnet::shm {

class Channel;
class ShmEndpoint;

struct ShmOptions {
  size_t ring_bytes = 1 << 20;   // per ring; a power of two
  size_t bulk_bytes = 4 << 20;   // per bulk area (payloads from kBulkMin); 0: none
  size_t eager_max = 32 << 10;   // larger payloads move with one cross-memory copy
  bool cma = true;               // allow process_vm_readv/writev (probed per peer)
  bool map = true;               // map peers' allocated regions (needs cma's permission)
  std::string ptracer = "parent";  // what to declare under Yama ptrace_scope 1 (ptracer.h)
  size_t split_min = 64 << 10;     // cross-memory transfers this large are copied by both sides,
  size_t split_crowded = 1 << 20;  // and from this size only while the host is crowded
  size_t commit_max = 256 << 20;  // segment bytes a process commits when channels open
  int heartbeat_ms = 1000;
  int peer_timeout_ms = 15000;
  int connect_timeout_ms = 30000;
};

// What identifies "the same host" for shared memory: hostname, boot id and network
// namespace (ranks in different lab namespaces must not use shm). PODNET_HOST_ID overrides.
std::string local_host_id();

// The transport's part of an address: "<host id>,<pid>,<socket name>".
struct ShmAddress {
  std::string host_id;
  pid_t pid = 0;
  std::string socket;
};
Result<ShmAddress> parse_shm_address(std::string_view s);

class ShmTransport final : public detail::Transport, public detail::Poller {
 public:
  static Result<std::unique_ptr<ShmTransport>> create(detail::ProgressEngine& engine,
                                                      detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
                                                      std::string host_id, const ShmOptions& options);
  ~ShmTransport() override;

  std::string_view name() const noexcept override { return "shm"; }
  detail::Capabilities caps() const noexcept override { return {}; }
  std::string address() const override;
  const std::string& host_id() const { return host_id_; }
  Result<std::shared_ptr<detail::TransportEndpoint>> connect(uint64_t peer_id, int peer_rank,
                                                             std::string_view peer_address) override;
  void shutdown() override;

  // Poller
  int poll() override;
  bool arm() override;
  void disarm() override;

  detail::ProgressEngine& engine() { return engine_; }
  detail::MemoryRegistry& registry() { return registry_; }
  const ShmOptions& options() const { return options_; }
  // Whether a cross-memory transfer of `len` bytes is split between both sides: from
  // split_min, and from split_crowded too while the host has more runnable threads than
  // CPUs (the peer that copies the other half may not be running then).
  bool split(size_t len) const {
    return len >= options_.split_min && (len >= options_.split_crowded || !engine_.crowded());
  }
  int doorbell() const { return doorbell_; }
  uint64_t ctx_id() const { return ctx_id_; }
  int rank() const { return rank_; }
  // Starts watching a channel's socket (replies, bye, hang-up) for `ep`.
  Status watch(const std::shared_ptr<Channel>& ch, const std::shared_ptr<ShmEndpoint>& ep);

 private:
  class Listener;
  class Doorbell;
  class Watch;
  class PendingAccept;
  ShmTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
               std::string host_id, const ShmOptions& options);
  void accept_ready();
  void on_hello(PendingAccept* pending);
  std::shared_ptr<ShmEndpoint> endpoint_for(uint64_t peer_id, int rank, const std::string& socket, pid_t pid);
  using EndpointList = std::vector<ShmEndpoint*>;
  const EndpointList& list() const { return *list_.load(std::memory_order_acquire); }
  void housekeeping();

  detail::ProgressEngine& engine_;
  detail::MemoryRegistry& registry_;
  const uint64_t ctx_id_;
  const int rank_;
  const std::string host_id_;
  const ShmOptions options_;
  std::string socket_name_;
  int listen_fd_ = -1;
  int doorbell_ = -1;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Doorbell> doorbell_handler_;

  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<ShmEndpoint>> endpoints_;
  // What poll() walks without a lock: endpoints are never removed while the transport lives,
  // so the list only grows; replaced lists are kept until the transport dies.
  std::atomic<const EndpointList*> list_;
  std::vector<std::unique_ptr<EndpointList>> lists_;
  // poll() skips endpoints to this process while Channel::local_publishes() stays where it
  // last saw it, except every kLocalPollEvery-th turn. Relaxed: a lost update between two
  // polling threads costs one extra or one skipped turn.
  std::atomic<uint64_t> local_seen_{~uint64_t{0}};
  // Socket watchers live until the transport dies: epoll may still report an event for one
  // after it was removed.
  std::vector<std::unique_ptr<detail::EventHandler>> handlers_;
  bool shut_down_ = false;
  std::atomic<bool> closing_{false};  // shutdown() began: a peer's hang-up is our own close
  int64_t last_beat_ns_ = 0;
};

}  // namespace podnet::shm
