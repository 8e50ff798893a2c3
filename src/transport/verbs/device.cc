#include "transport/verbs/device.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace podnet::verbs {
namespace {

bool is_ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
};

// Picks the GID on `port`: the index asked for, else the first RoCEv2 IPv4 GID. The table
// can have 1024 entries (rxe): one ibv_query_gid_table call instead of a query per entry.
Status pick_gid(Device& d, int wanted) {
  std::vector<ibv_gid_entry> entries(d.port_attr.gid_tbl_len > 0 ? d.port_attr.gid_tbl_len : 1);
  ssize_t n = ibv_query_gid_table(d.ctx, entries.data(), entries.size(), 0);
  if (n < 0) return Status::Unavailable("{}: ibv_query_gid_table: {}", d.name, std::strerror(static_cast<int>(-n)));
  const ibv_gid_entry* best = nullptr;
  for (ssize_t i = 0; i < n; ++i) {
    const auto& e = entries[i];
    if (static_cast<int>(e.port_num) != d.port) continue;
    if (wanted >= 0) {
      if (static_cast<int>(e.gid_index) == wanted) best = &e;
      continue;
    }
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && is_ipv4_mapped(e.gid)) {
      best = &e;
      break;
    }
  }
  if (best == nullptr && wanted >= 0)
    return Status::Unavailable("{} port {}: GID index {} (PODNET_VERBS_GID_INDEX) is not a valid GID", d.name, d.port,
                               wanted);
  if (best == nullptr)
    return Status::Unavailable(
        "{} port {}: no RoCEv2 IPv4 GID (is an IPv4 address configured on its netdev? see `ibv_devinfo -v` "
        "or set PODNET_VERBS_GID_INDEX)",
        d.name, d.port);
  d.gid_index = static_cast<int>(best->gid_index);
  d.gid = best->gid;
  d.family = is_ipv4_mapped(d.gid) ? 4 : 6;
  if (d.family == 6)
    return Status::Unavailable("{} port {}: GID index {} is IPv6; connection setup supports IPv4 GIDs only", d.name,
                               d.port, d.gid_index);
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, d.gid.raw + 12, ip, sizeof ip);
  d.ipv4 = ip;
  return {};
}

// Opens `dev` and finds an active port (or the one asked for). Leaves d half-filled on error.
Status open_one(ibv_device* dev, int want_port, Device& d) {
  d.name = ibv_get_device_name(dev);
  d.ctx = ibv_open_device(dev);
  if (d.ctx == nullptr) return Status::Unavailable("{}: ibv_open_device: {}", d.name, std::strerror(errno));
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(d.ctx, &attr); rc != 0)
    return Status::Unavailable("{}: ibv_query_device: {}", d.name, std::strerror(rc));
  std::string states;
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    if (want_port > 0 && p != want_port) continue;
    ibv_port_attr pa{};
    if (ibv_query_port(d.ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
    states += fmt::format("{}port {} {}", states.empty() ? "" : ", ", p, ibv_port_state_str(pa.state));
    if (pa.state != IBV_PORT_ACTIVE) continue;
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
      states += " (InfiniBand link layer: only RoCE is supported)";
      continue;
    }
    d.port = p;
    d.port_attr = pa;
    break;
  }
  if (d.port == 0) return Status::Unavailable("{}: no active RoCE port ({})", d.name, states.empty() ? "none" : states);
  d.max_msg = d.port_attr.max_msg_sz;
  d.max_qp_wr = attr.max_qp_wr;
  d.max_rd_atom = attr.max_qp_rd_atom;
  d.pd = ibv_alloc_pd(d.ctx);
  if (d.pd == nullptr) return Status::Unavailable("{}: ibv_alloc_pd: {}", d.name, std::strerror(errno));
  return {};
}

}  // namespace

Device::~Device() {
  if (pd) ibv_dealloc_pd(pd);
  if (ctx) ibv_close_device(ctx);
}

Result<std::unique_ptr<Device>> open_device(const VerbsOptions& options) {
  std::string want = options.device;
  int want_port = 0;
  if (size_t c = want.find(':'); c != std::string::npos) {
    want_port = std::atoi(want.c_str() + c + 1);
    want.resize(c);
  }
  DeviceList dl;
  dl.list = ibv_get_device_list(&dl.n);
  if (dl.list == nullptr)
    return Status::Unavailable("no RDMA device on this host (ibv_get_device_list: {}: the kernel has no RDMA "
                               "support, or no rdma driver / rdma_rxe link is loaded)",
                               std::strerror(errno));
  if (dl.n == 0)
    return Status::Unavailable("no RDMA device on this host (no rdma kernel driver, or /dev/infiniband missing)");
  std::string tried;
  for (int i = 0; i < dl.n; ++i) {
    if (!want.empty() && want != ibv_get_device_name(dl.list[i])) continue;
    auto d = std::make_unique<Device>();
    Status st = open_one(dl.list[i], want_port, *d);
    if (st.ok()) st = pick_gid(*d, options.gid_index);
    if (st.ok()) {
      PODNET_INFO(kNet, "verbs: device {} port {} GID index {} ({}) MTU {} max message {} bytes", d->name, d->port,
                  d->gid_index, gid_text(d->gid), mtu_bytes(d->port_attr.active_mtu), d->max_msg);
      return d;
    }
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", st.message());
  }
  if (tried.empty()) return Status::Unavailable("PODNET_VERBS_DEVICE='{}': no such RDMA device", options.device);
  return Status::Unavailable("no usable RDMA device: {}", tried);
}

std::string gid_hex(const ibv_gid& gid) {
  std::string s;
  for (uint8_t b : gid.raw) s += fmt::format("{:02x}", b);
  return s;
}

bool parse_gid_hex(std::string_view hex, ibv_gid* gid) {
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    unsigned v = 0;
    for (int j = 0; j < 2; ++j) {
      char c = hex[2 * i + j];
      int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (x < 0) return false;
      v = v * 16 + static_cast<unsigned>(x);
    }
    gid->raw[i] = static_cast<uint8_t>(v);
  }
  return true;
}

std::string gid_text(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

int mtu_bytes(int mtu_enum) { return mtu_enum >= 1 && mtu_enum <= 5 ? 128 << mtu_enum : 0; }

std::string wc_status_words(ibv_wc_status status, double retry_budget_ms) {
  std::string_view raw = ibv_wc_status_str(status);
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return fmt::format(
          "retry exceeded ({}): the peer is unreachable or the fabric drops packets; retry budget = timeout x "
          "retries = {:.0f} ms. Check that the peer is alive, the link and its GID/subnet (PODNET_VERBS_GID_INDEX), "
          "and PFC/ECN on lossy RoCE",
          raw, retry_budget_ms);
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return fmt::format("receiver not ready ({}): the peer had no receive buffer posted for too long; the peer's "
                         "progress is stuck or it exited",
                         raw);
    case IBV_WC_REM_ACCESS_ERR:
      return fmt::format("remote access error ({}): the target's NIC refused the rkey, the range or the access "
                         "rights (region deregistered, out of bounds, or not granted)",
                         raw);
    case IBV_WC_REM_INV_REQ_ERR:
      return fmt::format("remote invalid request ({}): the target refused the request (message larger than its "
                         "receive buffer, or an operation its queue pair does not allow)",
                         raw);
    case IBV_WC_REM_OP_ERR:
      return fmt::format("remote operation error ({}): the target could not complete the operation", raw);
    case IBV_WC_LOC_PROT_ERR:
      return fmt::format("local protection error ({}): a local buffer is not covered by its memory registration "
                         "(was it deregistered while in use?)",
                         raw);
    case IBV_WC_LOC_LEN_ERR:
      return fmt::format("local length error ({}): a message does not fit the posted receive buffer", raw);
    case IBV_WC_LOC_ACCESS_ERR:
      return fmt::format("local access error ({}): the local memory registration lacks the access needed", raw);
    case IBV_WC_WR_FLUSH_ERR:
      return fmt::format("flushed ({}): the queue pair had already failed", raw);
    case IBV_WC_FATAL_ERR:
      return fmt::format("fatal device error ({}): check `dmesg` and the device's health", raw);
    default:
      return fmt::format("{} (status {})", raw, static_cast<int>(status));
  }
}

}  // namespace podnet::verbs
