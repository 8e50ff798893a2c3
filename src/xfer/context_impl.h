// The transfer engine's Context: owns the progress engine, the memory registry and the
// transports, and hands out endpoints that validate arguments before a transport sees them.
#pragma once

#include <podnet/xfer.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "base/config.h"
#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/shm/transport.h"
#include "transport/tcp/transport.h"
#include "transport/verbs/verbs.h"

namespace podnet::detail {

// The parsed form of Context::address().
struct PeerAddress {
  uint64_t id = 0;
  int rank = -1;
  std::string host;  // hostname, for humans
  std::string tcp;   // "ip:port"
  std::string shm;   // "host-id,pid,socket"; empty: the peer has no shm transport
  std::string want;  // the peer's PODNET_TRANSPORT
  std::string verbs;  // verbs::VerbsAddress; empty: no usable RDMA device
  int link_mbps = 0;  // bootstrap::fastest_link_mbps() of the peer's interfaces; 0: loopback or unknown
};
std::string format_address(const PeerAddress& a);
Result<PeerAddress> parse_address(std::string_view blob);
// True when every address names the same host (the shm host id, else the host name) and
// there are more ranks than `cpus`: then the ranks take turns on the CPUs. Every rank
// computes the same answer from the same addresses.
bool one_host_oversubscribed(const std::vector<PeerAddress>& peers, long cpus);

class ContextImpl final : public Context {
 public:
  static Result<std::unique_ptr<Context>> create(const ContextOptions& options);
  ~ContextImpl() override;

  int rank() const noexcept override { return rank_; }
  std::string address() const override;
  std::string listen_address() const override { return tcp_->address(); }
  Result<MemoryRegion> register_memory(void* ptr, size_t len, Access access) override;
  Result<MemoryRegion> allocate_memory(size_t len, Access access) override;
  Result<std::shared_ptr<Endpoint>> connect(std::string_view peer_address) override;
  // A caller that polls drives progress itself: the background thread stays parked meanwhile
  // (as while a thread waits), instead of competing with it for the CPU and the completions.
  void progress() override { engine_->drive(); }
  // Internal (the collectives): the key of the region this process allocated
  // (allocate_memory) that holds [p, p + len), or 0.
  uint64_t allocated_key(const void* p, size_t len) const { return registry_->allocated_key(p, len); }

 private:
  ContextImpl() = default;
  Status create_shm();
  Status create_verbs();  // verbs_ stays null (with verbs_why_) when there is no usable device
  // choose()'s verbs clause: the verbs transport when both peers can use it, else null and why.
  Transport* choose_verbs(const PeerAddress& peer, std::string* why) const;
  // Which transport serves this peer; the same answer on both sides.
  Result<detail::Transport*> choose(const PeerAddress& peer, std::string* why) const;

  int rank_ = -1;
  uint64_t id_ = 0;
  std::string hostname_;
  int link_mbps_ = 0;  // bootstrap::fastest_link_mbps() of the interfaces used
  Config config_;
  std::unique_ptr<ProgressEngine> engine_;
  std::shared_ptr<MemoryRegistry> registry_;
  std::unique_ptr<tcp::TcpTransport> tcp_;
  std::unique_ptr<shm::ShmTransport> shm_;
  std::unique_ptr<Transport> verbs_;
  std::string verbs_why_;  // why verbs_ is null
  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Endpoint>> endpoints_;
};

}  // namespace podnet::detail
