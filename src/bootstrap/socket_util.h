// Small IPv4 socket helpers shared by the store server and client (internal to src/bootstrap,
// and used by xfer/world.cc for the store port it derives).
#pragma once

#include <netinet/in.h>
#include <podnet/status.h>

#include <cstdint>
#include <string>

namespace podnet::bootstrap {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "host:port" with a non-empty host and a port in 1..65535.
Result<HostPort> parse_host_port(const std::string& address);
// Dotted quad or a name (resolved to its first IPv4 address); "" and "0.0.0.0" mean any.
Result<sockaddr_in> resolve_ipv4(const std::string& host, uint16_t port);
// strerror text ("Connection refused"), for the message of every failed system call.
std::string errno_text(int err);
// The first port of the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range),
// 32768 when it cannot be read: ports below it are never the source port of an outgoing
// connection.
int ephemeral_port_floor();

}  // namespace podnet::bootstrap
