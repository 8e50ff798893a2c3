// Small IPv4 socket helpers shared by the store server and client (internal to src/bootstrap).
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

}  // namespace podnet::bootstrap
