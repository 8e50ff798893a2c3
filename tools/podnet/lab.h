// The virtual pod lab (`podnet lab`): a pod on one machine. Hosts are network namespaces,
// each rail a bridge in one "switch" namespace, each link a veth pair shaped with tbf in both
// directions. Nothing is created in the root namespace, so a lab can only reach itself.
//
// Names (NAME: the lab's name, default "lab"):
//   podnet-NAME-sw       the switch namespace: bridge br<r> per rail, port h<i>r<r> per link
//   podnet-NAME-h<i>     host i (0-based): interface eth<r> per rail, 10.199.<r>.<i+1>/24
//   /run/podnet-lab/NAME.json   the state file (spec, creation time, current rates)
// Every namespace's lo carries the alias "podnet-lab NAME"; `down` deletes only namespaces
// whose name fits the pattern exactly and that carry that marker (or hold nothing but lo:
// a run that crashed right after creating them).
//
// Every operation runs the real `ip` and `tc` (subprocess.h) and needs root.
// Blocking: every call blocks until its ip/tc commands are done (milliseconds each).
// Thread-safety: none; one lab operation at a time per lab (the state file is created with
// O_EXCL, so two `up` of one name cannot both succeed).
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace podnet::tool::lab {

inline constexpr const char* kDefaultName = "lab";
inline constexpr const char* kStateDir = "/run/podnet-lab";
inline constexpr int kMaxHosts = 250;  // host i gets .<i+1> in a /24
inline constexpr int kMaxRails = 16;

struct Spec {
  std::string name = kDefaultName;
  int hosts = 2;
  int rails = 1;
  uint64_t rate_bps = 1'000'000'000;  // every link, both directions
  int mtu = 1500;
};

// ---- names and the address plan ------------------------------------------------------------
Status validate_name(const std::string& name);  // [a-z0-9][a-z0-9_-]{0,31}
std::string switch_ns(const std::string& name);
std::string host_ns(const std::string& name, int host);
std::string host_ifname(int rail);             // eth<r>
std::string switch_port(int host, int rail);   // h<i>r<r>
std::string bridge_name(int rail);             // br<r>
std::string host_address(int host, int rail);  // 10.199.<r>.<i+1>
inline constexpr int kPrefixLen = 24;
std::string state_path(const std::string& name);
std::string marker(const std::string& name);  // the alias on lo: "podnet-lab NAME"
// Whether `ns` is one of lab `name`'s namespaces by its name alone (exact pattern).
bool is_lab_namespace(const std::string& name, const std::string& ns);

// ---- values ---------------------------------------------------------------------------------
// "1gbit", "250mbit", "100M", "1G" (bits per second, SI: k=1000), "1500000000" (bit/s).
Result<uint64_t> parse_rate(const std::string& text);
std::string format_rate(uint64_t bps);  // "1Gbit", "250Mbit", "1500kbit"
// "h3" or "3" -> 3, checked against the lab's host count.
Result<int> parse_host(const std::string& text, int hosts);

// ---- state ----------------------------------------------------------------------------------
// The state file, as written by `up`; kUnavailable when the lab does not exist.
Result<nlohmann::json> load_state(const std::string& name);
Result<Spec> load_spec(const std::string& name);

// ---- operations (lab_ops.cc) ----------------------------------------------------------------
// Creates the lab; on any failure removes what it created and returns the first error.
// Refuses (kInvalidArgument, *exists set) when the lab's state file or any of its namespaces
// exists, and then changes nothing.
Status up(const Spec& spec, bool* exists = nullptr);
// Removes every namespace of the lab (state file or not) and the state file; `removed` gets
// what was deleted, `warnings` what was left alone and why. Idempotent.
Status down(const std::string& name, std::vector<std::string>* removed, std::vector<std::string>* warnings);
// Sets the switch port of (host, rail) down or up: the host's interface loses or regains
// its carrier, as when a cable is pulled.
Status set_link(const std::string& name, int host, int rail, bool up);
// Reshapes (host, rail) in both directions.
Status set_rate(const std::string& name, int host, int rail, uint64_t bps);
// The live state, read from the kernel (not just the state file): per link its address,
// admin and carrier state, tbf rates in both directions, MTU and byte counters.
Result<nlohmann::json> status(const std::string& name);
// Labs with a state file or with namespaces that carry a lab marker.
Result<nlohmann::json> list();

}  // namespace podnet::tool::lab
