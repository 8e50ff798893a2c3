// Names, the address plan, value parsing and the state file of the lab (see lab.h).
#include "lab.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

namespace podnet::tool::lab {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

Status validate_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 32 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  if (!ok)
    return Status::InvalidArgument(
        "lab name '{}': use 1-32 characters a-z, 0-9, '_' or '-', starting with a letter or digit", name);
  return {};
}

std::string switch_ns(const std::string& name) { return "podnet-" + name + "-sw"; }
std::string host_ns(const std::string& name, int host) { return fmt::format("podnet-{}-h{}", name, host); }
std::string host_ifname(int rail) { return fmt::format("eth{}", rail); }
std::string switch_port(int host, int rail) { return fmt::format("h{}r{}", host, rail); }
std::string bridge_name(int rail) { return fmt::format("br{}", rail); }
std::string host_address(int host, int rail) { return fmt::format("10.199.{}.{}", rail, host + 1); }
std::string state_path(const std::string& name) { return fmt::format("{}/{}.json", kStateDir, name); }
std::string marker(const std::string& name) { return "podnet-lab " + name; }

bool is_lab_namespace(const std::string& name, const std::string& ns) {
  const std::string prefix = "podnet-" + name + "-";
  if (!ns.starts_with(prefix)) return false;
  std::string_view rest = std::string_view(ns).substr(prefix.size());
  // Exact: "sw" or "h" + digits, so lab "a" never matches lab "a-b"'s "podnet-a-b-sw".
  return rest == "sw" || (rest.size() >= 2 && rest[0] == 'h' && all_digits(rest.substr(1)));
}

Result<uint64_t> parse_rate(const std::string& text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t value = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  std::string_view unit(p, static_cast<size_t>(t.data() + t.size() - p));
  if (ec != std::errc() || p == t.data())
    return Status::InvalidArgument("rate '{}': expected a number with a unit, e.g. 1gbit, 250mbit, 10G", text);
  uint64_t mult = 0;
  if (unit.empty() || unit == "bit")
    mult = 1;
  else if (unit == "k" || unit == "kbit")
    mult = 1000;
  else if (unit == "m" || unit == "mbit")
    mult = 1000'000;
  else if (unit == "g" || unit == "gbit")
    mult = 1000'000'000;
  else if (unit == "t" || unit == "tbit")
    mult = 1000'000'000'000;
  if (mult == 0)
    return Status::InvalidArgument(
        "rate '{}': unknown unit '{}' (bit, kbit, mbit, gbit, tbit or K, M, G, T; "
        "bits per second, SI prefixes)",
        text, unit);
  uint64_t bps = value * mult;
  // tc keeps rates in bytes per second; below 8 kbit/s tbf cannot pass a full-size frame in
  // any sensible time, above 400 Gbit/s nothing on one machine keeps up.
  if (value == 0 || bps / mult != value || bps < 8000 || bps > 400'000'000'000ull)
    return Status::InvalidArgument("rate '{}' must be between 8kbit and 400gbit", text);
  return bps;
}

std::string format_rate(uint64_t bps) {
  for (auto [div, unit] : {std::pair<uint64_t, const char*>{1000'000'000'000, "Tbit"},
                           {1000'000'000, "Gbit"},
                           {1000'000, "Mbit"},
                           {1000, "kbit"}})
    if (bps >= div && bps % div == 0) return fmt::format("{}{}", bps / div, unit);
  for (auto [div, unit] : {std::pair<uint64_t, const char*>{1000'000'000, "Gbit"}, {1000'000, "Mbit"}})
    if (bps >= div) return fmt::format("{:.3g}{}", static_cast<double>(bps) / div, unit);
  return fmt::format("{}bit", bps);
}

Result<int> parse_host(const std::string& text, int hosts) {
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == 'h') digits.remove_prefix(1);
  int host = -1;
  if (all_digits(digits)) std::from_chars(digits.data(), digits.data() + digits.size(), host);
  if (host < 0 || host >= hosts)
    return Status::InvalidArgument("host '{}': expected h0 .. h{} (or 0 .. {})", text, hosts - 1, hosts - 1);
  return host;
}

Result<nlohmann::json> load_state(const std::string& name) {
  PODNET_RETURN_IF_ERROR(validate_name(name));
  std::ifstream in(state_path(name));
  if (!in)
    return Status::Unavailable("lab '{}' does not exist (no {}); create it with `podnet lab up --name {}`", name,
                               state_path(name), name);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("{} is not valid JSON; `podnet lab down --name {}` removes the lab",
                                   state_path(name), name);
  return j;
}

Result<Spec> load_spec(const std::string& name) {
  PODNET_ASSIGN_OR_RETURN(nlohmann::json j, load_state(name));
  if (j.value("state", "") != "up")
    return Status::Unavailable(
        "lab '{}' is not up (state '{}' in {}): a `lab up` is running or crashed; "
        "`podnet lab down --name {}` cleans up",
        name, j.value("state", ""), state_path(name), name);
  Spec s;
  s.name = name;
  s.hosts = j.value("hosts", 0);
  s.rails = j.value("rails", 0);
  s.rate_bps = j.value("rate_bps", uint64_t{0});
  s.mtu = j.value("mtu", 0);
  if (s.hosts < 1 || s.hosts > kMaxHosts || s.rails < 1 || s.rails > kMaxRails || s.rate_bps == 0)
    return Status::InvalidArgument("{}: hosts, rails or rate_bps missing or out of range", state_path(name));
  return s;
}

}  // namespace podnet::tool::lab
