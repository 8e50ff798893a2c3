#include "bootstrap/netif.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "bootstrap/socket_util.h"

namespace podnet::bootstrap {
namespace {

std::string describe(const std::vector<NetIf>& ifs) {
  if (ifs.empty()) return "none";
  std::string out;
  for (const NetIf& i : ifs) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}{}{}", i.name, i.ipv4, i.up ? "" : " down", i.loopback ? " loopback" : "");
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The first up interface accepted by `match`, non-loopback ones first: a prefix or an
// exclusion that happens to cover lo should still prefer a real link.
template <typename Match>
const NetIf* first_up(const std::vector<NetIf>& ifs, Match match) {
  for (bool want_loopback : {false, true})
    for (const NetIf& i : ifs)
      if (i.up && i.loopback == want_loopback && match(i)) return &i;
  return nullptr;
}

// The link speed the driver reports in Mb/s (ethtool's GSET, which needs no privilege and,
// unlike /sys/class/net, answers for the network namespace this process is in), or -1.
int link_speed_mbps(const char* name) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
  ifr.ifr_data = reinterpret_cast<char*>(&cmd);
  int rc = ioctl(fd, SIOCETHTOOL, &ifr);
  close(fd);
  if (rc != 0) return -1;
  uint32_t mbps = ethtool_cmd_speed(&cmd);
  if (mbps == 0 || mbps == static_cast<uint32_t>(SPEED_UNKNOWN) || mbps > 10'000'000) return -1;
  return static_cast<int>(mbps);
}

}  // namespace

Result<std::vector<NetIf>> list_interfaces() {
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return Status::Unavailable("getifaddrs: {}", errno_text(errno));
  std::vector<NetIf> out;
  for (ifaddrs* a = head; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, ip, sizeof ip);
    out.push_back({a->ifa_name, ip, (a->ifa_flags & IFF_LOOPBACK) != 0, (a->ifa_flags & IFF_UP) != 0,
                   link_speed_mbps(a->ifa_name)});
  }
  freeifaddrs(head);
  return out;
}

int fastest_link_mbps(const std::vector<NetIf>& rails) {
  int m = 0;
  for (const NetIf& i : rails) {
    if (i.loopback || i.speed_mbps <= 0) return 0;
    m = std::max(m, i.speed_mbps);
  }
  return m;
}

int auto_tcp_streams(const std::vector<NetIf>& rails) {
  if (!rails.empty() && std::all_of(rails.begin(), rails.end(), [](const NetIf& i) { return i.loopback; }))
    return kStreamsLoopback;
  return slow_links(rails) ? kStreamsSlowLinks : kStreamsFastLinks;
}

size_t auto_tcp_eager_max(const std::vector<NetIf>& rails) {
  return slow_links(rails) ? kEagerSlowLinks : kEagerFastLinks;
}

Result<NetIf> select_interface(const std::vector<NetIf>& ifs, const std::string& spec) {
  if (trim(spec).empty()) {
    if (const NetIf* i = first_up(ifs, [](const NetIf&) { return true; })) return *i;
    return Status::Unavailable("no IPv4 interface is up (interfaces: {})", describe(ifs));
  }
  std::string_view rest = spec;
  std::string notes;  // why named interfaces were passed over, for the error
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    char kind = item.empty() ? '\0' : item.front();
    std::string_view arg = kind == '^' || kind == '!' ? item.substr(1) : item;
    if (arg.empty())
      return Status::InvalidArgument("interface spec \"{}\": empty entry \"{}\" (use name, ^prefix or !prefix)", spec,
                                     item);
    const NetIf* found = nullptr;
    if (kind == '^') {
      found = first_up(ifs, [&](const NetIf& i) { return std::string_view(i.name).starts_with(arg); });
    } else if (kind == '!') {
      found = first_up(ifs, [&](const NetIf& i) { return !std::string_view(i.name).starts_with(arg); });
    } else {
      for (const NetIf& i : ifs)
        if (i.name == arg && (found == nullptr || (!found->up && i.up))) found = &i;
      if (found != nullptr && !found->up) {
        notes += fmt::format("; {} is down", arg);
        found = nullptr;
      }
    }
    if (found != nullptr) return *found;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return Status::Unavailable("no up IPv4 interface matches \"{}\"{} (interfaces: {})", spec, notes, describe(ifs));
}

Result<std::vector<NetIf>> select_interfaces(const std::vector<NetIf>& ifs, const std::string& spec, int max) {
  // The first is select_interface()'s choice (and its error), so one rail means what it did.
  PODNET_ASSIGN_OR_RETURN(NetIf first, select_interface(ifs, spec));
  std::vector<NetIf> out{first};
  auto add = [&](const NetIf& i) {
    if (max > 0 && static_cast<int>(out.size()) >= max) return;
    for (const NetIf& o : out)
      if (o.name == i.name) return;  // an interface with two addresses is one rail
    out.push_back(i);
  };
  if (trim(spec).empty()) {
    for (const NetIf& i : ifs)
      if (i.up && !i.loopback) add(i);
    return out;
  }
  for (std::string_view rest = spec;;) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    char kind = item.empty() ? '\0' : item.front();
    std::string_view arg = kind == '^' || kind == '!' ? item.substr(1) : item;
    for (bool want_loopback : {false, true})
      for (const NetIf& i : ifs) {
        if (!i.up || i.loopback != want_loopback) continue;
        std::string_view n = i.name;
        if ((kind == '^' && n.starts_with(arg)) || (kind == '!' && !n.starts_with(arg)) ||
            (kind != '^' && kind != '!' && n == arg))
          add(i);
      }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<std::string> software_rdma_devices(const std::string& sysfs_class) {
  std::vector<std::string> soft;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_class, ec)) {
    std::error_code ec2;
    const std::string real = std::filesystem::canonical(e.path(), ec2).string();
    if (ec2 || real.find("/devices/virtual/") == std::string::npos) return {};
    soft.push_back(e.path().filename().string());
  }
  std::sort(soft.begin(), soft.end());
  return soft;
}

}  // namespace podnet::bootstrap
