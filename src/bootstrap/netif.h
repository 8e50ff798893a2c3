// Interface selection. PODNET_IFNAME syntax: "eth0" exact name; "^eth" any name with that
// prefix; "!docker" any interface except those starting with "docker"; a comma-separated
// list of these is tried in order. Empty: the first up, non-loopback IPv4 interface, else lo.
#pragma once

#include <podnet/status.h>

#include <string>
#include <vector>

namespace podnet::bootstrap {

struct NetIf {
  std::string name;
  std::string ipv4;  // dotted quad
  bool loopback = false;
  bool up = false;
};

Result<std::vector<NetIf>> list_interfaces();
// Picks from `ifs` by the spec above; the error lists the interfaces that exist.
Result<NetIf> select_interface(const std::vector<NetIf>& ifs, const std::string& spec);

}  // namespace podnet::bootstrap
