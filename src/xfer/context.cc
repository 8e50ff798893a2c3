#include "xfer/context_impl.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <random>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/netif.h"
#include "xfer/endpoint_impl.h"

namespace podnet {

Result<std::unique_ptr<Context>> Context::create(const ContextOptions& options) {
  return detail::ContextImpl::create(options);
}

namespace detail {

std::string format_address(const PeerAddress& a) {
  std::string s = fmt::format("podnet1;id={:x};rank={};host={};tcp={}", a.id, a.rank, a.host, a.tcp);
  if (!a.shm.empty()) s += fmt::format(";shm={}", a.shm);
  if (!a.want.empty()) s += fmt::format(";want={}", a.want);
  if (!a.verbs.empty()) s += fmt::format(";verbs={}", a.verbs);
  if (a.link_mbps > 0) s += fmt::format(";mbps={}", a.link_mbps);
  return s;
}

bool one_host_oversubscribed(const std::vector<PeerAddress>& peers, long cpus) {
  if (peers.size() <= 1 || static_cast<long>(peers.size()) <= cpus) return false;
  // The shm host id (host name, boot id and network namespace) where every rank has one,
  // else the host name (PODNET_TRANSPORT=tcp leaves shm out of the address).
  const bool shm = std::none_of(peers.begin(), peers.end(), [](const PeerAddress& a) { return a.shm.empty(); });
  auto host = [shm](const PeerAddress& a) -> std::string {
    if (!shm) return a.host;
    auto s = shm::parse_shm_address(a.shm);
    return s.ok() ? s->host_id : std::string();
  };
  const std::string first = host(peers.front());
  return !first.empty() &&
         std::all_of(peers.begin(), peers.end(), [&](const PeerAddress& a) { return host(a) == first; });
}

Result<PeerAddress> parse_address(std::string_view blob) {
  constexpr std::string_view kPrefix = "podnet1;";
  if (blob.substr(0, kPrefix.size()) != kPrefix)
    return Status::InvalidArgument("not a podnet address (expected 'podnet1;...'): '{}'", blob.substr(0, 40));
  PeerAddress a;
  std::string_view rest = blob.substr(kPrefix.size());
  while (!rest.empty()) {
    size_t semi = rest.find(';');
    std::string_view field = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? "" : rest.substr(semi + 1);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return Status::InvalidArgument("bad address field '{}'", field);
    std::string_view k = field.substr(0, eq), v = field.substr(eq + 1);
    if (k == "id") {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), a.id, 16);
      if (ec != std::errc() || p != v.data() + v.size()) return Status::InvalidArgument("bad address id '{}'", v);
    } else if (k == "rank") {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), a.rank);
      if (ec != std::errc() || p != v.data() + v.size()) return Status::InvalidArgument("bad address rank '{}'", v);
    } else if (k == "host") {
      a.host = v;
    } else if (k == "tcp") {
      a.tcp = v;
    } else if (k == "shm") {
      a.shm = v;
    } else if (k == "want") {
      a.want = v;
    } else if (k == "verbs") {
      a.verbs = v;
    } else if (k == "mbps") {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), a.link_mbps);
      if (ec != std::errc() || p != v.data() + v.size() || a.link_mbps < 0)
        return Status::InvalidArgument("bad address link speed '{}'", v);
    }  // unknown fields are skipped: newer peers may add transports
  }
  if (a.id == 0 || a.tcp.empty()) return Status::InvalidArgument("address lacks id or tcp: '{}'", blob);
  return a;
}

Result<std::unique_ptr<Context>> ContextImpl::create(const ContextOptions& options) {
  int64_t t0 = now_ns();
  PODNET_RETURN_IF_ERROR(load_config());
  std::unique_ptr<ContextImpl> c(new ContextImpl());
  c->config_ = config();
  c->rank_ = options.rank >= 0 ? options.rank : c->config_.rank;
  if (c->rank_ >= 0) log::set_rank(c->rank_);
  std::random_device rd;
  c->id_ = (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  c->hostname_ = host;
  if (c->config_.transport != "auto" && c->config_.transport != "tcp" && c->config_.transport != "shm" &&
      c->config_.transport != "verbs")
    return Status::InvalidArgument("PODNET_TRANSPORT='{}': available transports are auto, tcp, shm, verbs",
                                   c->config_.transport);

  std::string bind = options.bind_address;
  int streams = c->config_.tcp_streams;  // 0: auto, from the interfaces chosen below
  uint64_t eager_max = c->config_.tcp_eager_max;  // likewise
  if (bind.empty()) {
    PODNET_ASSIGN_OR_RETURN(auto ifs, bootstrap::list_interfaces());
    // One interface per rail (PODNET_RAILS); tcp listens on each of "ip1,ip2,...".
    if (c->config_.rails < 0 || c->config_.rails > 16)
      return Status::InvalidArgument("PODNET_RAILS={}: expected 0 (every match) .. 16", c->config_.rails);
    PODNET_ASSIGN_OR_RETURN(auto nifs, bootstrap::select_interfaces(ifs, c->config_.ifname, c->config_.rails));
    for (const auto& nif : nifs) {
      bind += (bind.empty() ? "" : ",") + nif.ipv4;
      PODNET_INFO(kXfer, "using interface {} ({}, {} Mb/s) (PODNET_IFNAME='{}')", nif.name, nif.ipv4,
                  nif.speed_mbps, c->config_.ifname);
    }
    c->link_mbps_ = bootstrap::fastest_link_mbps(nifs);
    if (streams == 0) {
      streams = bootstrap::auto_tcp_streams(nifs);
      PODNET_INFO(kXfer, "PODNET_TCP_STREAMS=0 (auto): {} tcp stream{} per peer and rail", streams,
                  streams == 1 ? "" : "s");
    }
    if (eager_max == 0) {
      eager_max = bootstrap::auto_tcp_eager_max(nifs);
      PODNET_INFO(kXfer, "PODNET_TCP_EAGER_MAX=0 (auto): tagged sends up to {} KiB go eagerly", eager_max >> 10);
    }
  }
  // An explicit bind address (tests: loopback).
  if (streams == 0) streams = bootstrap::kStreamsFastLinks;
  if (eager_max == 0) eager_max = bootstrap::kEagerFastLinks;
  ProgressEngine::Options po;
  po.spin_us = c->config_.spin_us;
  po.spin_long_us = c->config_.spin_long_us;
  po.busy_poll = c->config_.busy_poll;
  po.serve_spin_us = c->config_.serve_spin_us;
  po.yield_every = c->config_.spin_yield_every;
  PODNET_ASSIGN_OR_RETURN(c->engine_, ProgressEngine::create(po));
  c->registry_ = std::make_shared<MemoryRegistry>(c->id_);
  tcp::TcpOptions to;
  to.streams = streams;
  to.stripe_min = c->config_.tcp_stripe_min;
  to.chunk = c->config_.tcp_chunk;
  to.chunk_mss = c->config_.tcp_chunk_mss;
  to.eager_max = eager_max;
  to.exchange_eager_max = c->config_.tcp_exchange_eager_max;
  to.ack_delay_us = c->config_.tcp_ack_delay_us;
  to.sndbuf = c->config_.tcp_sndbuf;
  to.rcvbuf = c->config_.tcp_rcvbuf;
  to.heartbeat_ms = c->config_.heartbeat_ms;
  to.peer_timeout_ms = c->config_.peer_timeout_ms;
  to.connect_timeout_ms = c->config_.connect_timeout_ms;
  to.zerocopy_min = c->config_.tcp_zerocopy_min;
  if (c->config_.tcp_zerocopy == "on") to.zerocopy = tcp::TcpOptions::Zerocopy::kOn;
  else if (c->config_.tcp_zerocopy == "off") to.zerocopy = tcp::TcpOptions::Zerocopy::kOff;
  else if (c->config_.tcp_zerocopy != "auto")
    return Status::InvalidArgument("PODNET_TCP_ZEROCOPY='{}': expected auto, on or off", c->config_.tcp_zerocopy);
  if (to.chunk < 4096) return Status::InvalidArgument("PODNET_TCP_CHUNK={} must be at least 4096", to.chunk);
  to.congestion = c->config_.tcp_congestion;
  if (to.congestion.empty() || to.congestion.size() >= 16)  // TCP_CA_NAME_MAX
    return Status::InvalidArgument("PODNET_TCP_CONGESTION='{}': expected auto, system or a congestion control name",
                                   to.congestion);
  PODNET_ASSIGN_OR_RETURN(c->tcp_, tcp::TcpTransport::create(*c->engine_, *c->registry_, c->id_, c->rank_, bind,
                                                             options.port, to));
  if (c->config_.transport != "tcp") PODNET_RETURN_IF_ERROR(c->create_shm());
  if (c->config_.transport == "auto" || c->config_.transport == "verbs") PODNET_RETURN_IF_ERROR(c->create_verbs());
  c->engine_->start();
  PODNET_INFO(kXfer, "context ready in {} us: tcp {} ({} streams){}", (now_ns() - t0) / 1000, c->tcp_->address(),
              to.streams, c->shm_ ? fmt::format(", shm {}", c->shm_->address()) : std::string());
  return std::unique_ptr<Context>(std::move(c));
}

Status ContextImpl::create_shm() {
  shm::ShmOptions so;
  so.ring_bytes = config_.shm_ring;
  so.bulk_bytes = config_.shm_bulk;
  so.eager_max = config_.shm_eager_max;
  so.cma = config_.shm_cma;
  so.map = config_.shm_map;
  so.ptracer = config_.shm_ptracer;
  so.split_min = config_.shm_split_min == 0 ? SIZE_MAX : config_.shm_split_min;
  so.split_crowded = config_.shm_split_crowded == 0 ? SIZE_MAX : config_.shm_split_crowded;
  so.commit_max = config_.shm_commit;
  so.heartbeat_ms = config_.heartbeat_ms;
  so.peer_timeout_ms = config_.peer_timeout_ms;
  so.connect_timeout_ms = config_.connect_timeout_ms;
  std::string host = config_.host_id.empty() ? shm::local_host_id() : config_.host_id;
  auto t = shm::ShmTransport::create(*engine_, *registry_, id_, rank_, host, so);
  if (t.ok()) {
    shm_ = std::move(t).value();
    return {};
  }
  // A knob with a bad value is an error, as for verbs: falling back would hide the typo.
  if (config_.transport == "shm") return t.status().with_context("PODNET_TRANSPORT=shm");
  if (t.status().code() == Code::kInvalidArgument) return t.status().with_context("shared memory");
  PODNET_WARN(kXfer, "shared memory unavailable, using tcp for every peer: {}", t.status().message());
  return {};
}

// --- verbs (src/transport/verbs) ------------------------------------------------------------
Status ContextImpl::create_verbs() {
  verbs::VerbsOptions vo;
  vo.device = config_.verbs_device;
  vo.gid_index = config_.verbs_gid_index;
  vo.eager_max = config_.verbs_eager_max;
  vo.recv_depth = config_.verbs_recv_depth;
  vo.sq_depth = config_.verbs_sq_depth;
  vo.chunk = config_.verbs_chunk;
  vo.qps = config_.verbs_qps;
  vo.inline_bytes = config_.verbs_inline;
  vo.signal_every = config_.verbs_signal_every;
  vo.check = config_.verbs_check;
  vo.ack_timeout = config_.verbs_timeout;
  vo.retry_count = config_.verbs_retry;
  vo.heartbeat_ms = config_.heartbeat_ms;
  vo.peer_timeout_ms = config_.peer_timeout_ms;
  vo.connect_timeout_ms = config_.connect_timeout_ms;
  auto t = verbs::create_verbs_transport(*engine_, *registry_, id_, rank_, vo);
  if (t.ok()) {
    verbs_ = std::move(t).value();
    return {};
  }
  if (config_.transport == "verbs" || t.status().code() == Code::kInvalidArgument)
    return t.status().with_context("PODNET_TRANSPORT={}: verbs", config_.transport);
  verbs_why_ = t.status().message();
  PODNET_INFO(kXfer, "verbs transport unavailable: {}", verbs_why_);
  return {};
}

Transport* ContextImpl::choose_verbs(const PeerAddress& peer, std::string* why) const {
  if (!verbs_) {
    *why = fmt::format("verbs unavailable here: {}", verbs_why_);
    return nullptr;
  }
  Status st = verbs::verbs_reachable(verbs_->address(), peer.verbs);
  if (!st.ok()) {
    *why = fmt::format("no verbs to rank {}: {}", peer.rank, st.message());
    return nullptr;
  }
  *why = "both have a usable RDMA device";
  return verbs_.get();
}
// ----------------------------------------------------------------------------------------------

Result<Transport*> ContextImpl::choose(const PeerAddress& peer, std::string* why) const {
  const std::string& mine = config_.transport;
  const std::string theirs = peer.want.empty() ? "auto" : peer.want;
  if (mine != theirs && mine != "auto" && theirs != "auto")
    return Status::InvalidArgument("rank {} wants PODNET_TRANSPORT={} and this rank {}: set the same on every rank",
                                   peer.rank, theirs, mine);
  if (mine == "tcp" || theirs == "tcp") {
    *why = "PODNET_TRANSPORT=tcp";
    return static_cast<Transport*>(tcp_.get());
  }
  std::string peer_host;
  if (!peer.shm.empty()) {
    auto a = shm::parse_shm_address(peer.shm);
    if (a.ok()) peer_host = a->host_id;
  }
  const bool want_verbs = mine == "verbs" || theirs == "verbs";
  if (shm_ && !want_verbs && !peer_host.empty() && peer_host == shm_->host_id()) {
    *why = "same host";
    return static_cast<Transport*>(shm_.get());
  }
  std::string reason = !shm_ ? "shared memory unavailable here"
                       : peer_host.empty() ? "the peer has no shared-memory transport"
                                           : fmt::format("other host ({} vs {})", peer_host, shm_->host_id());
  if (mine == "shm" || theirs == "shm")
    return Status::InvalidArgument("PODNET_TRANSPORT=shm, but rank {} cannot use shared memory: {}", peer.rank, reason);
  std::string verbs_why;
  if (Transport* v = choose_verbs(peer, &verbs_why)) {
    *why = fmt::format("{}; {}", want_verbs ? "PODNET_TRANSPORT=verbs" : reason, verbs_why);
    return v;
  }
  if (want_verbs)
    return Status::InvalidArgument("PODNET_TRANSPORT=verbs, but rank {} cannot use verbs: {}", peer.rank, verbs_why);
  *why = fmt::format("{}; {}", reason, verbs_why);
  return static_cast<Transport*>(tcp_.get());
}

ContextImpl::~ContextImpl() {
  if (shm_) shm_->shutdown();
  if (verbs_) verbs_->shutdown();
  if (tcp_) tcp_->shutdown();
  if (engine_) engine_->stop();
  {
    std::lock_guard lk(mu_);
    endpoints_.clear();
  }
  tcp_.reset();
  shm_.reset();
  verbs_.reset();
  engine_.reset();
}

std::string ContextImpl::address() const {
  PeerAddress a{id_,
                rank_,
                hostname_,
                tcp_->address(),
                shm_ ? shm_->address() : std::string(),
                config_.transport,
                verbs_ ? verbs_->address() : std::string(),
                link_mbps_};
  return format_address(a);
}

Result<MemoryRegion> ContextImpl::register_memory(void* ptr, size_t len, Access access) {
  PODNET_ASSIGN_OR_RETURN(auto state, registry_->add(ptr, len, access));
  return MemoryRegion(std::move(state));
}

Result<MemoryRegion> ContextImpl::allocate_memory(size_t len, Access access) {
  PODNET_ASSIGN_OR_RETURN(auto mem, MappedMemory::create(len));
  std::byte* data = mem->data();
  PODNET_ASSIGN_OR_RETURN(auto state, registry_->add(data, len, access, std::move(mem)));
  return MemoryRegion(std::move(state));
}

Result<std::shared_ptr<Endpoint>> ContextImpl::connect(std::string_view peer_address) {
  PODNET_ASSIGN_OR_RETURN(auto a, parse_address(peer_address));
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(a.id);
  if (it != endpoints_.end()) return it->second;
  std::string why;
  PODNET_ASSIGN_OR_RETURN(Transport * t, choose(a, &why));
  const std::string& where = t == shm_.get() ? a.shm : t == verbs_.get() ? a.verbs : a.tcp;
  auto te = t->connect(a.id, a.rank, where);
  if (!te.ok()) return te.status().with_context("connect to rank {} ({} {})", a.rank, t->name(), where);
  PODNET_INFO(kXfer, "rank {}: {} ({})", a.rank, t->name(), why);
  auto ep = std::make_shared<EndpointImpl>(std::move(te).value(), t->name(), engine_.get());
  endpoints_[a.id] = ep;
  return std::shared_ptr<Endpoint>(ep);
}

}  // namespace detail
}  // namespace podnet
