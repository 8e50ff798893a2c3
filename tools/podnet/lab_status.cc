// `podnet lab status` and `list`: the lab as the kernel sees it, read with `ip -j` and
// `tc -j` (see lab.h), so a change made by hand shows up too.
#include <dirent.h>

#include <algorithm>
#include <map>
#include <set>

#include "lab.h"
#include "subprocess.h"

namespace podnet::tool::lab {
namespace {

using nlohmann::json;

Result<json> run_json(const std::vector<std::string>& argv) {
  PODNET_ASSIGN_OR_RETURN(std::string text, run_tool_checked(argv));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return Status::Protocol("{}: output is not a JSON array", command_line(argv));
  return j;
}

// Interface name -> its `ip -s -j addr show` object.
Result<std::map<std::string, json>> interfaces(const std::string& ns) {
  PODNET_ASSIGN_OR_RETURN(json arr, run_json({"ip", "-n", ns, "-s", "-j", "addr", "show"}));
  std::map<std::string, json> out;
  for (json& i : arr) {
    std::string name = i.value("ifname", "");  // before the move: json's operator= takes its argument by value
    out[name] = std::move(i);
  }
  return out;
}

// Interface name -> tbf rate in bit/s (0: not shaped).
Result<std::map<std::string, uint64_t>> rates(const std::string& ns) {
  PODNET_ASSIGN_OR_RETURN(json arr, run_json({"tc", "-n", ns, "-j", "qdisc", "show"}));
  std::map<std::string, uint64_t> out;
  for (const json& q : arr) {
    if (q.value("kind", "") != "tbf" || !q.value("root", false) || !q.contains("dev")) continue;
    const json& o = q.value("options", json::object());
    out[q["dev"].get<std::string>()] = o.value("rate", uint64_t{0}) * 8;  // tc reports bytes/s
  }
  return out;
}

bool has_flag(const json& iface, const char* flag) {
  const json& flags = iface.value("flags", json::array());
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

}  // namespace

Result<json> status(const std::string& name) {
  PODNET_ASSIGN_OR_RETURN(json state, load_state(name));
  json out = state;
  const int hosts = state.value("hosts", 0), rails = state.value("rails", 0);
  const std::string sw = switch_ns(name);
  auto sw_ifs = interfaces(sw);
  auto sw_rates = rates(sw);
  if (!sw_ifs.ok() || !sw_rates.ok())
    return Status::Unavailable("lab '{}': switch namespace {} unreadable ({}); `podnet lab down --name {}` cleans up",
                               name, sw, (sw_ifs.ok() ? sw_rates.status() : sw_ifs.status()).message(), name);
  out["host_list"] = json::array();
  for (int h = 0; h < hosts; ++h) {
    const std::string hns = host_ns(name, h);
    json host{{"host", fmt::format("h{}", h)}, {"index", h}, {"namespace", hns}, {"links", json::array()}};
    auto ifs = interfaces(hns);
    auto hrates = rates(hns);
    if (!ifs.ok() || !hrates.ok()) {
      host["error"] = (ifs.ok() ? hrates.status() : ifs.status()).message();
      out["host_list"].push_back(host);
      continue;
    }
    for (int r = 0; r < rails; ++r) {
      const std::string dev = host_ifname(r), port = switch_port(h, r);
      json link{{"rail", r}, {"interface", dev}, {"switch_port", port}, {"bridge", bridge_name(r)}};
      auto it = ifs->find(dev);
      auto pit = sw_ifs->find(port);
      if (it == ifs->end() || pit == sw_ifs->end()) {
        link["state"] = "missing";
        host["links"].push_back(link);
        continue;
      }
      const json& i = it->second;
      link["address"] = "";
      for (const json& a : i.value("addr_info", json::array()))
        if (a.value("family", "") == "inet")
          link["address"] = fmt::format("{}/{}", a.value("local", ""), a.value("prefixlen", 0));
      link["port_up"] = has_flag(pit->second, "UP");
      link["carrier"] = has_flag(i, "LOWER_UP");
      link["state"] = link["port_up"].get<bool>() && link["carrier"].get<bool>() && has_flag(i, "UP") ? "up" : "down";
      link["mtu"] = i.value("mtu", 0);
      link["rate_out_bps"] = hrates->count(dev) ? hrates->at(dev) : 0;       // host -> switch
      link["rate_in_bps"] = sw_rates->count(port) ? sw_rates->at(port) : 0;  // switch -> host
      const json& st = i.value("stats64", json::object());
      link["tx_bytes"] = st.value("tx", json::object()).value("bytes", uint64_t{0});
      link["rx_bytes"] = st.value("rx", json::object()).value("bytes", uint64_t{0});
      host["links"].push_back(link);
    }
    out["host_list"].push_back(host);
  }
  return out;
}

Result<json> list() {
  std::set<std::string> names;
  if (DIR* d = ::opendir(kStateDir)) {
    while (dirent* e = ::readdir(d)) {
      std::string f = e->d_name;
      if (f.size() > 5 && f.ends_with(".json")) names.insert(f.substr(0, f.size() - 5));
    }
    ::closedir(d);
  }
  // Namespaces whose names look like a lab's switch: a crashed `up` may have left no state file.
  std::map<std::string, std::vector<std::string>> spaces;
  if (DIR* d = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(d)) {
      std::string ns = e->d_name;
      if (ns.starts_with("podnet-") && ns.ends_with("-sw") && ns.size() > 10)
        names.insert(ns.substr(7, ns.size() - 10));
    }
    ::closedir(d);
  }
  json out = json::array();
  for (const std::string& n : names) {
    if (!validate_name(n).ok()) continue;
    auto state = load_state(n);
    json entry{{"name", n}, {"state", state.ok() ? state->value("state", "?") : "no state file"}};
    if (state.ok()) {
      entry["hosts"] = state->value("hosts", 0);
      entry["rails"] = state->value("rails", 0);
      entry["rate_bps"] = state->value("rate_bps", uint64_t{0});
      entry["created"] = state->value("created", "");
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace podnet::tool::lab
