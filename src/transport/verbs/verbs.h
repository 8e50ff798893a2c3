// The RDMA verbs transport's entry points, free of libibverbs headers: the context creates
// the transport through create_verbs_transport() and compares address fields with
// verbs_reachable(). A build without libibverbs (PODNET_HAVE_VERBS 0) links unavailable.cc,
// whose create_verbs_transport() says so; everything else is the same.
#pragma once

#include <podnet/status.h>

#include <memory>
#include <string>
#include <string_view>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace podnet::verbs {

struct VerbsOptions {
  std::string device;          // "mlx5_0" or "mlx5_0:1"; empty: the first device with an active port
  int gid_index = -1;          // -1: the first RoCEv2 GID of the address family (IPv4, then IPv6)
  size_t eager_max = 8 << 10;  // tagged sends up to this size are copied through receive buffers
  int recv_depth = 128;        // receive buffers per peer = message credits
  int sq_depth = 256;          // work requests in flight per queue pair; more wait in a local queue
  size_t chunk = 0;            // largest single work request; 0: the port's max_msg_sz
  size_t inline_bytes = 256;   // sends up to this size (header included) go inline; 0: never
  int signal_every = 16;       // one completion per N chunks / inline messages in a stream
  int qps = 1;                 // queue pairs per peer and direction that carry RDMA data (1..8)
  bool check = true;           // pre-check one-sided ops against the target's answer (off: NIC only)
  int ack_timeout = 14;        // local ACK timeout exponent: 4.096 us * 2^n
  int retry_count = 7;         // transport retries before "retry exceeded"
  int heartbeat_ms = 1000;     // a byte on the setup socket (and an RDMA write) this often
  int peer_timeout_ms = 15000; // setup socket silent this long: the peer host is gone
  int connect_timeout_ms = 30000;
};

// The transport's address field: "<device>,<port>,<gid index>,<gid hex>,<mtu>,<family>,<ip:port>".
struct VerbsAddress {
  std::string device;
  int port = 0;
  int gid_index = 0;
  std::string gid;    // 32 hex digits
  int mtu = 0;        // ibv_mtu enum value (1: 256 ... 5: 4096)
  int family = 0;     // 4: IPv4-mapped RoCEv2 GID, 6: IPv6
  std::string oob;    // "ip:port" of the connection-setup socket
};
std::string format_verbs_address(const VerbsAddress& a);
Result<VerbsAddress> parse_verbs_address(std::string_view s);

// Whether two ranks can talk verbs: both have a device and their GIDs are of one address
// family (a RoCEv2 IPv4 GID cannot reach an IPv6 one). The reason when not.
Status verbs_reachable(std::string_view mine, std::string_view theirs);

// Discovers the device, port and GID; fails with kUnavailable and the reason (no RDMA
// device, no active port, no RoCEv2 GID, built without libibverbs).
Result<std::unique_ptr<detail::Transport>> create_verbs_transport(detail::ProgressEngine& engine,
                                                                  detail::MemoryRegistry& registry, uint64_t ctx_id,
                                                                  int rank, const VerbsOptions& options);

}  // namespace podnet::verbs
