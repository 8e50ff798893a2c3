// The verbs address field and the reachability rule: compiled with or without libibverbs.
#include <charconv>
#include <vector>

#include "transport/verbs/verbs.h"

namespace podnet::verbs {

std::string format_verbs_address(const VerbsAddress& a) {
  return fmt::format("{},{},{},{},{},{},{}", a.device, a.port, a.gid_index, a.gid, a.mtu, a.family, a.oob);
}

Result<VerbsAddress> parse_verbs_address(std::string_view s) {
  std::vector<std::string_view> f;
  for (size_t pos = 0;;) {
    size_t c = s.find(',', pos);
    f.push_back(s.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  if (f.size() != 7) return Status::InvalidArgument("bad verbs address '{}' (expected 7 fields)", s);
  VerbsAddress a;
  auto num = [&](std::string_view v, int& out) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size();
  };
  a.device = f[0];
  a.gid = f[3];
  a.oob = f[6];
  if (!num(f[1], a.port) || !num(f[2], a.gid_index) || !num(f[4], a.mtu) || !num(f[5], a.family) ||
      a.gid.size() != 32 || a.oob.find(':') == std::string::npos)
    return Status::InvalidArgument("bad verbs address '{}'", s);
  return a;
}

Status verbs_reachable(std::string_view mine, std::string_view theirs) {
  if (mine.empty()) return Status::Unavailable("no usable RDMA device here");
  if (theirs.empty()) return Status::Unavailable("the peer has no usable RDMA device");
  auto a = parse_verbs_address(mine);
  auto b = parse_verbs_address(theirs);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status().with_context("the peer's address");
  if (a->family != b->family)
    return Status::Unavailable("GID families differ (IPv{} here, IPv{} at the peer): set PODNET_VERBS_GID_INDEX",
                               a->family, b->family);
  return {};
}

}  // namespace podnet::verbs
