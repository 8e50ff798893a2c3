// An opened RDMA device: the port, the GID podnet uses on it, the protection domain and the
// device limits the transport sizes its queues and work requests by. Plus the words that
// explain a work completion's status to a human.
// Thread-safety: immutable after open_device(); ibv_* calls on it are thread-safe.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "transport/verbs/verbs.h"

namespace podnet::verbs {

struct Device {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  int port = 0;
  ibv_port_attr port_attr{};
  int gid_index = 0;
  ibv_gid gid{};
  int family = 4;            // 4: IPv4-mapped RoCEv2 GID; 6: IPv6
  std::string ipv4;          // the GID's IPv4 address (family 4)
  uint32_t max_msg = 0;      // bytes per work request (port max_msg_sz)
  int max_qp_wr = 0;
  int max_rd_atom = 0;

  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();
};

// Opens the device PODNET_VERBS_DEVICE names (or the first with an active Ethernet port) and
// picks the GID (PODNET_VERBS_GID_INDEX, or the first RoCEv2 IPv4 GID). kUnavailable with the
// reason when there is none.
Result<std::unique_ptr<Device>> open_device(const VerbsOptions& options);

std::string gid_hex(const ibv_gid& gid);
bool parse_gid_hex(std::string_view hex, ibv_gid* gid);
std::string gid_text(const ibv_gid& gid);  // "::ffff:10.0.0.1" / "fe80::1"
int mtu_bytes(int mtu_enum);

// A work completion's status in words: what it means and what to check. `retry_budget_ms`
// is timeout x retries, quoted by "retry exceeded".
std::string wc_status_words(ibv_wc_status status, double retry_budget_ms);

}  // namespace podnet::verbs
