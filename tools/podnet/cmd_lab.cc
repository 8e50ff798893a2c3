// `podnet lab`: a virtual pod of network namespaces on this machine (see lab.h for the model
// and docs/lab.md for the guide).
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "lab.h"
#include "subprocess.h"

namespace podnet::tool {
namespace {

using nlohmann::json;

constexpr int kExitError = 1, kExitUsage = 2, kExitExists = 3;

int fail(const char* cmd, const Status& st) {
  std::fprintf(stderr, "podnet lab %s: %s\n", cmd, st.message().c_str());
  return st.code() == Code::kInvalidArgument ? kExitUsage : kExitError;
}

constexpr const char* kLabFooter =
    R"(A lab is a pod on this machine: hosts are network namespaces, each rail a bridge in a
switch namespace, each link a veth pair shaped with tc tbf in both directions. Nothing is
created in the root namespace. Needs root, ip and tc (Debian iproute2).

  podnet-NAME-sw          switch namespace: bridge br<r> per rail, port h<i>r<r> per link
  podnet-NAME-h<i>        host i: interface eth<r> per rail, address 10.199.<r>.<i+1>/24
  /run/podnet-lab/NAME.json   state file

Example:
  podnet lab up --hosts 4 --rails 2 --rate 1gbit --name demo
  podnet run --lab demo -n 4 -- podnet bench coll allreduce -b 1M -e 64M -f 4
  podnet lab rate --name demo h2 all 250mbit      # make host 2 slow
  podnet lab link --name demo h1 0 down           # pull host 1's rail-0 cable
  podnet lab status --name demo
  podnet lab down --name demo
Exit status: 0 ok; 1 error (the message says which command failed and why); 2 bad arguments;
3 (up) the lab exists already.
See docs/lab.md.)";

void add_name(CLI::App* c, std::shared_ptr<std::string> name) {
  c->add_option("--name", *name, "the lab's name (podnet-NAME-* namespaces)")->capture_default_str();
}

// "all" -> every index; else one index parsed by `one`.
template <typename F>
Result<std::vector<int>> indices(const std::string& text, int count, F one) {
  std::vector<int> out;
  if (text == "all") {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  PODNET_ASSIGN_OR_RETURN(int i, one(text));
  out.push_back(i);
  return out;
}

Result<int> parse_rail(const std::string& text, int rails) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 4) {
    int r = std::stoi(text);
    if (r < rails) return r;
  }
  return Status::InvalidArgument("rail '{}': expected 0 .. {} or all", text, rails - 1);
}

void print_status(const json& s) {
  fmt::print("lab '{}': {} hosts, {} rails, {} links, MTU {}; state {}; created {} by pid {}\n", s.value("name", ""),
             s.value("hosts", 0), s.value("rails", 0), lab::format_rate(s.value("rate_bps", uint64_t{0})),
             s.value("mtu", 0), s.value("state", "?"), s.value("created", "?"), s.value("creator_pid", 0));
  fmt::print("switch namespace {}: bridge br<r> per rail; host namespaces {} .. {}\n", s.value("switch_namespace", ""),
             lab::host_ns(s.value("name", ""), 0), lab::host_ns(s.value("name", ""), s.value("hosts", 1) - 1));
  fmt::print("{:<5} {:<4} {:<6} {:<16} {:<17} {:<9} {:<9} {:>6} {:>14} {:>14}\n", "host", "rail", "iface", "address",
             "link", "rate out", "rate in", "mtu", "tx bytes", "rx bytes");
  for (const json& h : s.value("host_list", json::array())) {
    if (h.contains("error")) {
      fmt::print("{:<5} error: {}\n", h.value("host", ""), h.value("error", ""));
      continue;
    }
    for (const json& l : h.value("links", json::array())) {
      if (l.value("state", "") == "missing") {
        fmt::print("{:<5} {:<5} {:<6} missing\n", h.value("host", ""), l.value("rail", 0), l.value("interface", ""));
        continue;
      }
      std::string state = l.value("state", "");
      if (state == "down") state = l.value("port_up", false) ? "down (no carrier)" : "down (port down)";
      auto rate = [](uint64_t bps) { return bps == 0 ? std::string("unshaped") : lab::format_rate(bps); };
      fmt::print("{:<5} {:<4} {:<6} {:<16} {:<17} {:<9} {:<9} {:>6} {:>14} {:>14}\n", h.value("host", ""),
                 l.value("rail", 0), l.value("interface", ""), l.value("address", ""), state,
                 rate(l.value("rate_out_bps", uint64_t{0})), rate(l.value("rate_in_bps", uint64_t{0})),
                 l.value("mtu", 0), l.value("tx_bytes", uint64_t{0}), l.value("rx_bytes", uint64_t{0}));
    }
  }
  fmt::print("rate out: host -> switch (the host's egress); rate in: switch -> host\n");
  std::fflush(stdout);
}

// Replaces this process: `ip netns exec NS CMD...` in a UTS namespace of its own whose
// hostname is the namespace's name, so tools that tell hosts apart by name (Open MPI, logs)
// see one host per lab host. Returns only on failure.
int exec_in(const std::string& name, const std::string& host_text, std::vector<std::string> cmd) {
  auto spec = lab::load_spec(name);
  if (!spec.ok()) return fail("exec", spec.status());
  auto host = lab::parse_host(host_text, spec->hosts);
  if (!host.ok()) return fail("exec", host.status());
  if (cmd.empty())
    return fail("exec", Status::InvalidArgument("no command given: podnet lab exec HOST -- CMD [ARGS...]"));
  auto ip = find_tool("ip", "iproute2");
  if (!ip.ok()) return fail("exec", ip.status());
  const std::string ns = lab::host_ns(name, *host);
  if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(ns.data(), ns.size()) != 0)
    return fail("exec", Status::Unavailable("hostname {}: {} (needs root)", ns, strerror(errno)));
  std::vector<std::string> argv{*ip, "netns", "exec", ns};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::fflush(stdout);
  ::execv(ip->c_str(), args.data());
  std::fprintf(stderr, "podnet lab exec: exec %s: %s\n", ip->c_str(), strerror(errno));
  return 127;
}

}  // namespace

void add_lab_command(CLI::App& app) {
  CLI::App* labc = app.add_subcommand("lab",
                                      "a virtual pod on this machine: namespaces as hosts, bridges as rails, "
                                      "rate-limited veth links");
  labc->footer(kLabFooter);
  labc->require_subcommand(1);

  // up
  {
    auto spec = std::make_shared<lab::Spec>();
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    auto rate = std::make_shared<std::string>("1gbit");
    CLI::App* c = labc->add_subcommand("up", "create a lab: N hosts with R rails each, every link shaped to RATE");
    c->add_option("--hosts", spec->hosts, "number of hosts (namespaces podnet-NAME-h0 ..)")
        ->required()
        ->check(CLI::Range(1, lab::kMaxHosts));
    c->add_option("--rails", spec->rails, "interfaces per host (eth0 ..), one bridge and subnet 10.199.<r>.0/24 each")
        ->capture_default_str()
        ->check(CLI::Range(1, lab::kMaxRails));
    c->add_option("--rate", *rate, "every link's rate in each direction: 1gbit, 250mbit, 10G (bits/s, SI)")
        ->capture_default_str();
    c->add_option("--mtu", spec->mtu, "MTU of every link")->capture_default_str()->check(CLI::Range(576, 65535));
    add_name(c, name);
    c->footer(
        "Refuses when the lab exists (state file or namespaces): `podnet lab down --name NAME` first.\n"
        "Undoes everything it created when a step fails. Prints the lab's status when done.");
    c->callback([spec, name, rate] {
      spec->name = *name;
      auto bps = lab::parse_rate(*rate);
      if (!bps.ok()) return set_exit_code(fail("up", bps.status()));
      spec->rate_bps = *bps;
      bool exists = false;
      if (Status st = lab::up(*spec, &exists); !st.ok()) {
        int code = fail("up", st);
        return set_exit_code(exists ? kExitExists : code);
      }
      auto s = lab::status(*name);
      if (s.ok()) print_status(*s);
      set_exit_code(0);
    });
  }
  // down
  {
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    CLI::App* c = labc->add_subcommand("down", "remove a lab: its namespaces (and so its bridges and links) and state");
    add_name(c, name);
    c->footer(
        "Works after a crashed run too: it finds the lab's namespaces by name (podnet-NAME-sw,\n"
        "podnet-NAME-h<i>) and deletes those that carry the lab's marker. A lab that does not exist\n"
        "is no error (nothing to do).");
    c->callback([name] {
      std::vector<std::string> removed, warnings;
      Status st = lab::down(*name, &removed, &warnings);
      for (const auto& w : warnings) std::fprintf(stderr, "podnet lab down: warning: %s\n", w.c_str());
      if (!st.ok()) return set_exit_code(fail("down", st));
      if (removed.empty())
        fmt::print("lab '{}': nothing to remove\n", *name);
      else
        fmt::print("lab '{}': removed {}\n", *name, fmt::join(removed, ", "));
      set_exit_code(0);
    });
  }
  // status
  {
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = labc->add_subcommand("status", "hosts, addresses, link states, rates and byte counters, live");
    add_name(c, name);
    c->add_flag("--json", *as_json, "print JSON (the state file plus host_list[].links[])");
    c->callback([name, as_json] {
      auto s = lab::status(*name);
      if (!s.ok()) return set_exit_code(fail("status", s.status()));
      if (*as_json)
        std::cout << s->dump(2) << std::endl;
      else
        print_status(*s);
      set_exit_code(0);
    });
  }
  // list
  {
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = labc->add_subcommand("list", "labs on this machine (state files and leftover namespaces)");
    c->add_flag("--json", *as_json, "print JSON");
    c->callback([as_json] {
      auto l = lab::list();
      if (!l.ok()) return set_exit_code(fail("list", l.status()));
      if (*as_json) {
        std::cout << l->dump(2) << std::endl;
      } else {
        if (l->empty()) fmt::print("no labs\n");
        for (const json& e : *l)
          fmt::print("{:<20} {:<14} {} hosts, {} rails, {}\n", e.value("name", ""), e.value("state", ""),
                     e.value("hosts", 0), e.value("rails", 0), lab::format_rate(e.value("rate_bps", uint64_t{0})));
      }
      set_exit_code(0);
    });
  }
  // exec
  {
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    CLI::App* c =
        labc->add_subcommand("exec", "run a command inside a lab host: podnet lab exec HOST -- CMD [ARGS...]");
    add_name(c, name);
    c->footer(
        "HOST: h3 or 3. Runs `ip netns exec podnet-NAME-h<i> CMD...` (so /sys shows the host's\n"
        "interfaces) with the hostname podnet-NAME-h<i>; podnet is replaced by it, so the exit status is\n"
        "CMD's. Everything after HOST (and an optional \"--\") is CMD and its arguments.");
    c->prefix_command();
    c->validate_positionals();
    c->add_option("HOST", "h0 .. h<N-1>, then CMD [ARGS...]")
        ->check(CLI::Validator([](const std::string&) { return std::string("collected by prefix_command"); }, ""));
    c->callback([c, name] {
      std::vector<std::string> rest = c->remaining();
      if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
      if (rest.empty())
        return set_exit_code(fail("exec", Status::InvalidArgument("usage: podnet lab exec HOST -- CMD")));
      std::string host = rest.front();
      rest.erase(rest.begin());
      if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
      set_exit_code(exec_in(*name, host, rest));
    });
  }
  // link
  {
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    auto host = std::make_shared<std::string>(), rail = std::make_shared<std::string>(),
         state = std::make_shared<std::string>();
    CLI::App* c = labc->add_subcommand("link", "take a link down or bring it back: podnet lab link HOST RAIL down|up");
    add_name(c, name);
    c->add_option("HOST", *host, "h0 .. h<N-1>, or all")->required();
    c->add_option("RAIL", *rail, "0 .. R-1, or all")->required();
    c->add_option("STATE", *state, "down or up")->required()->check(CLI::IsMember({"down", "up"}));
    c->footer("Sets the switch port down (or up): the host's interface loses its carrier, like a pulled cable.");
    c->callback([name, host, rail, state] {
      auto spec = lab::load_spec(*name);
      if (!spec.ok()) return set_exit_code(fail("link", spec.status()));
      auto hs = indices(*host, spec->hosts, [&](const std::string& t) { return lab::parse_host(t, spec->hosts); });
      auto rs = indices(*rail, spec->rails, [&](const std::string& t) { return parse_rail(t, spec->rails); });
      if (!hs.ok()) return set_exit_code(fail("link", hs.status()));
      if (!rs.ok()) return set_exit_code(fail("link", rs.status()));
      for (int h : *hs)
        for (int r : *rs)
          if (Status st = lab::set_link(*name, h, r, *state == "up"); !st.ok()) return set_exit_code(fail("link", st));
      set_exit_code(0);
    });
  }
  // rate
  {
    auto name = std::make_shared<std::string>(lab::kDefaultName);
    auto host = std::make_shared<std::string>(), rail = std::make_shared<std::string>(),
         rate = std::make_shared<std::string>();
    CLI::App* c = labc->add_subcommand("rate", "reshape a link in both directions: podnet lab rate HOST RAIL RATE");
    add_name(c, name);
    c->add_option("HOST", *host, "h0 .. h<N-1>, or all")->required();
    c->add_option("RAIL", *rail, "0 .. R-1, or all")->required();
    c->add_option("RATE", *rate, "1gbit, 250mbit, 10G (bits/s, SI)")->required();
    c->callback([name, host, rail, rate] {
      auto spec = lab::load_spec(*name);
      if (!spec.ok()) return set_exit_code(fail("rate", spec.status()));
      auto bps = lab::parse_rate(*rate);
      if (!bps.ok()) return set_exit_code(fail("rate", bps.status()));
      auto hs = indices(*host, spec->hosts, [&](const std::string& t) { return lab::parse_host(t, spec->hosts); });
      auto rs = indices(*rail, spec->rails, [&](const std::string& t) { return parse_rail(t, spec->rails); });
      if (!hs.ok()) return set_exit_code(fail("rate", hs.status()));
      if (!rs.ok()) return set_exit_code(fail("rate", rs.status()));
      for (int h : *hs)
        for (int r : *rs)
          if (Status st = lab::set_rate(*name, h, r, *bps); !st.ok()) return set_exit_code(fail("rate", st));
      set_exit_code(0);
    });
  }
}

}  // namespace podnet::tool
