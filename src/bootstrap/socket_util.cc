#include "bootstrap/socket_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace podnet::bootstrap {

Result<HostPort> parse_host_port(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return Status::InvalidArgument("store address \"{}\" is not host:port", address);
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || ptr != last || port == 0 || port > 65535)
    return Status::InvalidArgument("store address \"{}\": port \"{}\" is not a number in 1..65535", address,
                                   address.substr(colon + 1));
  return HostPort{address.substr(0, colon), static_cast<uint16_t>(port)};
}

Result<sockaddr_in> resolve_ipv4(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (host.empty()) {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    return sa;
  }
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    std::string why = rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc);
    return Status::Unavailable("cannot resolve host \"{}\": getaddrinfo: {}", host, why);
  }
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

int ephemeral_port_floor() {
  int lo = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int a = 0, b = 0;
    if (std::fscanf(f, "%d %d", &a, &b) == 2 && a > 0) lo = a;
    std::fclose(f);
  }
  return lo;
}

}  // namespace podnet::bootstrap
