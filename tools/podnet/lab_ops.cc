// Creating, changing and removing a lab with the real `ip` and `tc` (see lab.h).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include "lab.h"
#include "subprocess.h"

namespace podnet::tool::lab {
namespace {

using nlohmann::json;

// The switch and the hosts queue at most this long per link (tbf latency) ...
constexpr const char* kQueue = "10ms";
// ... and let bursts of this many bytes pass at host speed: at least a whole 64 KiB GSO packet
// with its headers (or tbf splits it into MTU segments on every hop, which costs CPU), else
// 0.5 ms at line rate. Smaller is more faithful (a message below the burst is not slowed to
// the link rate), larger lets a busy host keep the link full.
constexpr uint64_t kMinBurst = 80 << 10;

Result<std::string> ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_tool_checked(argv);
}

Result<json> ip_json(const std::vector<std::string>& args) {
  PODNET_ASSIGN_OR_RETURN(std::string text, ip(args));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Protocol("ip {}: output is not JSON", command_line(args));
  return j;
}

// One direction of a link: the egress of `dev` in `ns`.
Status shape(const std::string& ns, const std::string& dev, uint64_t bps) {
  uint64_t burst = std::max<uint64_t>(kMinBurst, bps / 8 / 2000);
  return run_tool_checked({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                           fmt::format("{}bit", bps), "burst", std::to_string(burst), "latency", kQueue})
      .status();
}

// Writes a sysctl of another namespace: /proc/sys/net resolves against the network namespace
// of the thread that opens it, and a thread may enter a namespace on its own (setns affects
// only the calling thread for CLONE_NEWNET), so the process itself never moves.
Status write_sysctl(const std::string& ns, const std::string& path, const std::string& value) {
  int ns_fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) return Status::Unavailable("open /run/netns/{}: {}", ns, strerror(errno));
  Status result;
  std::thread t([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) {
      result = Status::Unavailable("setns {}: {}", ns, strerror(errno));
      return;
    }
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno != ENOENT) result = Status::Unavailable("{} in {}: open: {}", path, ns, strerror(errno));
      return;  // ENOENT: a kernel without IPv6 has nothing to disable
    }
    if (::write(fd, value.data(), value.size()) < 0)
      result = Status::Unavailable("{} in {}: write: {}", path, ns, strerror(errno));
    ::close(fd);
  });
  t.join();
  ::close(ns_fd);
  return result;
}

// The CPUs this process may run on, in the kernel's bitmap format: hex words of 32 CPUs,
// most significant first, separated by commas ("3", "ff,ffffffff").
std::string cpu_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
    CPU_ZERO(&set);
    CPU_SET(0, &set);
  }
  std::vector<uint32_t> words;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    words.resize(std::max<size_t>(words.size(), cpu / 32 + 1));
    words[cpu / 32] |= uint32_t{1} << (cpu % 32);
  }
  std::string out = fmt::format("{:x}", words.back());
  for (size_t i = words.size() - 1; i-- > 0;) out += fmt::format(",{:08x}", words[i]);
  return out;
}

// Receive packet steering on the lab's interfaces of namespace `ns`, to every CPU in `mask`,
// so that a link delivers each flow in order, as a wire does. A veth hands a packet to the
// backlog of the CPU that transmits it, which varies within one flow (the sending task's, the
// one whose softirq handled an acknowledgement, the one where tbf's timer fired): two
// backlogs drained by two CPUs, one flow out of order (8 hosts at 1 Gbit/s on 2 CPUs: 1,174
// segments retransmitted in one 20-call allreduce run of 16 and 64 MiB, 597 DSACKs for
// spurious ones; none with steering). With RPS the flow's hash picks one backlog for all its
// packets. sysfs shows a namespace's devices only where it is mounted from inside that
// namespace, so this runs in `ip netns exec`, which mounts it so. A kernel without RPS has no
// rps_cpus: left as it is.
Status steer_receives(const std::string& ns, const std::vector<std::string>& devs, const std::string& mask) {
  std::string script;
  for (const std::string& dev : devs)
    script += fmt::format(
        "for q in /sys/class/net/{}/queues/rx-*; do [ ! -e $q/rps_cpus ] || echo {} > $q/rps_cpus || exit 1; done; ",
        dev, mask);
  return run_tool_checked({"ip", "netns", "exec", ns, "sh", "-c", script}).status();
}

std::vector<std::string> namespaces_of(const std::string& name) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/run/netns");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d))
    if (is_lab_namespace(name, e->d_name)) out.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Status create_namespace(const Spec& s, const std::string& ns) {
  PODNET_RETURN_IF_ERROR(ip({"netns", "add", ns}).status());
  // The marker first, so that `down` can tell this namespace is ours from here on.
  PODNET_RETURN_IF_ERROR(ip({"-n", ns, "link", "set", "dev", "lo", "alias", marker(s.name)}).status());
  // IPv6 off before any interface exists: no link-local addresses, no neighbour discovery or
  // MLD chatter in the byte counters, IPv4 only (podnet's transports are IPv4).
  for (const char* which : {"all", "default"})
    PODNET_RETURN_IF_ERROR(write_sysctl(ns, fmt::format("/proc/sys/net/ipv6/conf/{}/disable_ipv6", which), "1"));
  return ip({"-n", ns, "link", "set", "dev", "lo", "up"}).status();
}

Status build(const Spec& s) {
  const std::string sw = switch_ns(s.name);
  PODNET_RETURN_IF_ERROR(create_namespace(s, sw));
  for (int h = 0; h < s.hosts; ++h) PODNET_RETURN_IF_ERROR(create_namespace(s, host_ns(s.name, h)));
  const std::string mtu = std::to_string(s.mtu);
  for (int r = 0; r < s.rails; ++r) {
    PODNET_RETURN_IF_ERROR(ip({"-n", sw, "link", "add", "name", bridge_name(r), "type", "bridge"}).status());
    PODNET_RETURN_IF_ERROR(ip({"-n", sw, "link", "set", "dev", bridge_name(r), "up"}).status());
  }
  for (int h = 0; h < s.hosts; ++h) {
    const std::string hns = host_ns(s.name, h);
    for (int r = 0; r < s.rails; ++r) {
      const std::string port = switch_port(h, r), dev = host_ifname(r);
      // Created inside the switch namespace with its peer placed straight into the host's:
      // no interface ever exists in the root namespace, not even for a moment.
      PODNET_RETURN_IF_ERROR(
          ip({"-n", sw, "link", "add", "name", port, "type", "veth", "peer", "name", dev, "netns", hns}).status());
      PODNET_RETURN_IF_ERROR(
          ip({"-n", sw, "link", "set", "dev", port, "mtu", mtu, "master", bridge_name(r), "up"}).status());
      PODNET_RETURN_IF_ERROR(ip({"-n", hns, "link", "set", "dev", dev, "mtu", mtu}).status());
      PODNET_RETURN_IF_ERROR(
          ip({"-n", hns, "addr", "add", fmt::format("{}/{}", host_address(h, r), kPrefixLen), "dev", dev}).status());
      PODNET_RETURN_IF_ERROR(ip({"-n", hns, "link", "set", "dev", dev, "up"}).status());
      PODNET_RETURN_IF_ERROR(shape(hns, dev, s.rate_bps));  // host -> switch
      PODNET_RETURN_IF_ERROR(shape(sw, port, s.rate_bps));  // switch -> host
    }
  }
  const std::string mask = cpu_mask();
  std::vector<std::string> ports, devs;
  for (int r = 0; r < s.rails; ++r) devs.push_back(host_ifname(r));
  for (int h = 0; h < s.hosts; ++h) {
    PODNET_RETURN_IF_ERROR(steer_receives(host_ns(s.name, h), devs, mask));
    for (int r = 0; r < s.rails; ++r) ports.push_back(switch_port(h, r));
  }
  return steer_receives(sw, ports, mask);
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  return buf;
}

json spec_json(const Spec& s, const std::string& state) {
  json j{{"name", s.name},
         {"state", state},
         {"hosts", s.hosts},
         {"rails", s.rails},
         {"rate_bps", s.rate_bps},
         {"mtu", s.mtu},
         {"created", now_text()},
         {"creator_pid", ::getpid()},
         {"switch_namespace", switch_ns(s.name)}};
  j["host_namespaces"] = json::array();
  for (int h = 0; h < s.hosts; ++h) j["host_namespaces"].push_back(host_ns(s.name, h));
  return j;
}

// Replaces the state file atomically (write a temporary file, then rename).
Status write_state(const std::string& name, const json& j) {
  const std::string path = state_path(name), tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable("open {}: {}", tmp, strerror(errno));
  std::string text = j.dump(2) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::Unavailable("write {}: {}", path, strerror(errno));
  }
  return {};
}

Status require_root() {
  if (::geteuid() != 0)
    return Status::Unavailable("podnet lab needs root (it creates network namespaces): run it as root or with sudo");
  PODNET_RETURN_IF_ERROR(find_tool("ip", "iproute2").status());
  return find_tool("tc", "iproute2").status();
}

}  // namespace

Status up(const Spec& s, bool* exists) {
  if (exists != nullptr) *exists = false;
  PODNET_RETURN_IF_ERROR(validate_name(s.name));
  if (s.hosts < 1 || s.hosts > kMaxHosts) return Status::InvalidArgument("--hosts {}: 1 .. {}", s.hosts, kMaxHosts);
  if (s.rails < 1 || s.rails > kMaxRails) return Status::InvalidArgument("--rails {}: 1 .. {}", s.rails, kMaxRails);
  if (s.mtu < 576 || s.mtu > 65535) return Status::InvalidArgument("--mtu {}: 576 .. 65535", s.mtu);
  PODNET_RETURN_IF_ERROR(require_root());
  if (::mkdir(kStateDir, 0755) != 0 && errno != EEXIST)
    return Status::Unavailable("mkdir {}: {}", kStateDir, strerror(errno));
  // O_EXCL: of two `up` with one name, exactly one gets past here.
  int fd = ::open(state_path(s.name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    if (exists != nullptr) *exists = true;
    auto old = load_state(s.name);
    std::string what = old.ok() ? fmt::format("state '{}', {} hosts, {} rails, created {} by pid {}",
                                              old->value("state", "?"), old->value("hosts", 0), old->value("rails", 0),
                                              old->value("created", "?"), old->value("creator_pid", 0))
                                : old.status().message();
    return Status::InvalidArgument("lab '{}' already exists ({}; {}); remove it first with `podnet lab down --name {}`",
                                   s.name, state_path(s.name), what, s.name);
  }
  if (fd < 0) return Status::Unavailable("create {}: {}", state_path(s.name), strerror(errno));
  ::close(fd);
  if (auto leftovers = namespaces_of(s.name); !leftovers.empty()) {
    if (exists != nullptr) *exists = true;
    ::unlink(state_path(s.name).c_str());
    return Status::InvalidArgument(
        "lab '{}': namespaces {} already exist (left by a crashed run?); "
        "`podnet lab down --name {}` removes them",
        s.name, fmt::join(leftovers, ", "), s.name);
  }
  Status st = write_state(s.name, spec_json(s, "creating"));
  if (st.ok()) st = build(s);
  if (st.ok()) st = write_state(s.name, spec_json(s, "up"));
  if (!st.ok()) {
    std::vector<std::string> removed, warnings;
    (void)down(s.name, &removed, &warnings);
    return st.with_context("lab up '{}' (undone)", s.name);
  }
  return {};
}

Status down(const std::string& name, std::vector<std::string>* removed, std::vector<std::string>* warnings) {
  PODNET_RETURN_IF_ERROR(validate_name(name));
  PODNET_RETURN_IF_ERROR(require_root());
  Status first;
  for (const std::string& ns : namespaces_of(name)) {
    auto links = ip_json({"-n", ns, "-j", "link", "show"});
    bool ours = false;
    if (links.ok()) {
      for (const json& l : *links)
        if (l.value("ifname", "") == "lo") ours = l.value("ifalias", "") == marker(name);
      // Unmarked but empty: `up` crashed between `ip netns add` and setting the marker.
      ours = ours || links->size() <= 1;
    }
    if (!ours) {
      warnings->push_back(
          fmt::format("{} fits the lab's names but does not carry the marker '{}'; left alone "
                      "(remove it with `ip netns del {}` if it is a lab's)",
                      ns, marker(name), ns));
      continue;
    }
    if (auto pids = run_tool({"ip", "netns", "pids", ns}); pids.ok() && !pids->out.empty()) {
      std::string list = pids->out;
      std::replace(list.begin(), list.end(), '\n', ' ');
      warnings->push_back(
          fmt::format("processes still run in {} (pids {}); their namespace lives on, detached, "
                      "until they exit",
                      ns, list));
    }
    Status st = ip({"netns", "del", ns}).status();
    if (st.ok())
      removed->push_back(ns);
    else if (first.ok())
      first = st;
  }
  if (::unlink(state_path(name).c_str()) == 0)
    removed->push_back(state_path(name));
  else if (errno != ENOENT && first.ok())
    first = Status::Unavailable("unlink {}: {}", state_path(name), strerror(errno));
  ::unlink((state_path(name) + ".tmp").c_str());
  return first;
}

Status set_link(const std::string& name, int host, int rail, bool up) {
  PODNET_RETURN_IF_ERROR(require_root());
  PODNET_ASSIGN_OR_RETURN(Spec s, load_spec(name));
  if (host < 0 || host >= s.hosts || rail < 0 || rail >= s.rails)
    return Status::InvalidArgument("lab '{}' has hosts h0 .. h{} and rails 0 .. {}", name, s.hosts - 1, s.rails - 1);
  return ip({"-n", switch_ns(name), "link", "set", "dev", switch_port(host, rail), up ? "up" : "down"}).status();
}

Status set_rate(const std::string& name, int host, int rail, uint64_t bps) {
  PODNET_RETURN_IF_ERROR(require_root());
  PODNET_ASSIGN_OR_RETURN(Spec s, load_spec(name));
  if (host < 0 || host >= s.hosts || rail < 0 || rail >= s.rails)
    return Status::InvalidArgument("lab '{}' has hosts h0 .. h{} and rails 0 .. {}", name, s.hosts - 1, s.rails - 1);
  PODNET_RETURN_IF_ERROR(shape(host_ns(name, host), host_ifname(rail), bps));
  return shape(switch_ns(name), switch_port(host, rail), bps);
}

}  // namespace podnet::tool::lab
