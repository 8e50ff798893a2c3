// Interface selection. PODNET_IFNAME syntax: "eth0" exact name; "^eth" any name with that
// prefix; "!docker" any interface except those starting with "docker"; a comma-separated
// list of these is tried in order. Empty: the first up, non-loopback IPv4 interface, else lo.
#pragma once

#include <podnet/status.h>

#include <cstddef>
#include <string>
#include <vector>

namespace podnet::bootstrap {

struct NetIf {
  std::string name;
  std::string ipv4;  // dotted quad
  bool loopback = false;
  bool up = false;
  int speed_mbps = -1;  // /sys/class/net/NAME/speed; -1: not reported (virtual, down, ...)
};

Result<std::vector<NetIf>> list_interfaces();
// Picks from `ifs` by the spec above; the error lists the interfaces that exist.
Result<NetIf> select_interface(const std::vector<NetIf>& ifs, const std::string& spec);
// Several interfaces (rails), for PODNET_RAILS: every up interface the spec accepts, in spec
// order (a prefix's or an exclusion's matches in the order listed, non-loopback first), each
// name once, at most `max` (0: all). With max 1 the same choice as select_interface(). An
// empty spec accepts every up non-loopback interface (lo only when there is none).
Result<std::vector<NetIf>> select_interfaces(const std::vector<NetIf>& ifs, const std::string& spec, int max);

// PODNET_TCP_STREAMS=0 (auto): connections per peer and rail for these interfaces. One
// stream fills a link of up to 10 Gbit/s, and more only add work (measured in the virtual pod
// lab at 1 Gbit/s: allreduce 16 MiB on 8 hosts 0.87 of the link with 4, 0.91 with 1).
// Loopback has no NIC queues to spread over and both ends share the host's cores: one stream
// measured better there too since the receive low-water mark (p2p writes of 64 MiB 46-48 vs
// 30-33 Gb/s, 2-rank allreduce of 64 MiB 49-52 vs 54-55 ms; 4 MiB allreduce is the exception,
// 2.1 vs 1.6-2.0 ms). Faster links and links of unknown speed get 4.
inline constexpr int kStreamsSlowLinks = 1, kStreamsLoopback = 1, kStreamsFastLinks = 4;
inline constexpr int kSlowLinkMaxMbps = 10000;
// The speed a rank publishes for its links (its address's `mbps`): the fastest of `rails` in
// Mbit/s, 0 when any is loopback or of unknown speed.
int fastest_link_mbps(const std::vector<NetIf>& rails);
// Links of this published speed are slow: known, and at most kSlowLinkMaxMbps. The one test
// both for this rank's own defaults and for what a communicator's ranks agree on.
inline bool is_slow_link(int mbps) { return mbps > 0 && mbps <= kSlowLinkMaxMbps; }
// True when every interface is a real link that reports a speed of at most kSlowLinkMaxMbps.
inline bool slow_links(const std::vector<NetIf>& rails) { return is_slow_link(fastest_link_mbps(rails)); }
int auto_tcp_streams(const std::vector<NetIf>& rails);
// PODNET_TCP_EAGER_MAX=0 (auto): the largest tagged send that goes without rendezvous. On a
// slow link the request-to-send / clear-to-send round trip waits in the shaped queues behind
// data (milliseconds when busy), while copying an unexpected message costs microseconds: a
// ring allreduce of 16 MiB on 8 lab hosts at 1 Gbit/s went from 0.91 to 0.94 of the link
// with 256 KiB (docs/lab.md). On loopback the rendezvous is cheap and saves the copy.
inline constexpr size_t kEagerSlowLinks = 256 << 10, kEagerFastLinks = 64 << 10;
size_t auto_tcp_eager_max(const std::vector<NetIf>& rails);

// The RDMA devices under `sysfs_class` (normally /sys/class/infiniband) when every one of
// them is a software device (rdma_rxe, siw: sysfs places them under /devices/virtual/, with
// no hardware parent); empty when there is none or any is hardware. `podnet run` does not
// bind ranks that use the verbs transport over such a device: its protocol work runs on the
// ranks' own CPUs (docs/verbs.md measures what binding costs).
std::vector<std::string> software_rdma_devices(const std::string& sysfs_class = "/sys/class/infiniband");

}  // namespace podnet::bootstrap
