#include "xfer/world.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "bootstrap/netif.h"
#include "bootstrap/socket_util.h"
#include "xfer/context_impl.h"
#include "xfer/endpoint_impl.h"

namespace podnet {
namespace {

// Resolves the store address; *host_it is set when this rank should host the server.
Result<std::string> store_address(const bootstrap::LaunchInfo& info, const Config& cfg, bool* host_it) {
  *host_it = false;
  if (!cfg.store.empty()) {
    *host_it = info.rank == 0 && info.launcher != "podnet";
    return cfg.store;
  }
  if (info.world_size == 1) {
    *host_it = true;
    return std::string("127.0.0.1:0");
  }
  if (info.launcher == "torchrun" && !info.store.empty()) {
    auto colon = info.store.rfind(':');
    int port = std::atoi(info.store.c_str() + colon + 1) + 1;
    *host_it = info.rank == 0;
    return fmt::format("{}:{}", info.store.substr(0, colon), port);
  }
  if (!info.store.empty()) return info.store;
  // One host, no address given: derive a port from the job's identity.
  const char* job = std::getenv("OMPI_MCA_ess_base_jobid");
  if (job == nullptr) job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr) job = std::getenv("PMI_JOBID");
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  bool single_host = local_size != nullptr && std::atoi(local_size) == info.world_size;
  if (job == nullptr || !single_host)
    return Status::InvalidArgument(
        "{} launch of {} ranks without a store address: set PODNET_STORE=host:port (a free port on rank 0's host)",
        info.launcher, info.world_size);
  *host_it = info.rank == 0;
  // Below the kernel's ephemeral range, so that no outgoing connection of another program
  // can be holding the port (measured: a CI run once found 35906 taken).
  const int lo = bootstrap::ephemeral_port_floor();
  const int base = 20000, span = lo - base >= 1000 ? lo - base : 20000;
  size_t h = std::hash<std::string>{}(job);
  return fmt::format("127.0.0.1:{}", base + static_cast<int>(h % static_cast<size_t>(span)));
}

}  // namespace

Result<std::unique_ptr<World>> World::create(const Options& options) {
  PODNET_RETURN_IF_ERROR(load_config());
  const Config& cfg = config();
  std::unique_ptr<World> w(new World());
  int64_t t0 = now_ns();
  if (options.rank >= 0 && options.size > 0) {
    if (options.rank >= options.size)
      return Status::InvalidArgument("World: rank {} is not below size {}", options.rank, options.size);
    if (options.size > 1 && options.store.empty())
      return Status::InvalidArgument("World: an explicit world of {} ranks needs a store address", options.size);
    w->info_.rank = options.rank;
    w->info_.world_size = options.size;
    w->info_.local_rank = options.rank;
    w->info_.store = options.store;
    w->info_.launcher = "explicit";
  } else {
    PODNET_ASSIGN_OR_RETURN(w->info_, bootstrap::detect_launch([](const char* n) { return std::getenv(n); }));
  }
  if (w->info_.launcher != "explicit") log::set_rank(w->info_.rank);
  w->timeout_ = options.timeout.count() > 0 ? options.timeout : std::chrono::milliseconds(cfg.store_timeout_ms);
  int64_t t1 = now_ns();

  bool host_it = false;
  std::string addr;
  if (w->info_.launcher == "explicit") {
    addr = w->info_.store.empty() ? "127.0.0.1:0" : w->info_.store;
    host_it = w->info_.store.empty();
  } else {
    PODNET_ASSIGN_OR_RETURN(addr, store_address(w->info_, cfg, &host_it));
  }
  if (host_it) {
    auto colon = addr.rfind(':');
    std::string host = addr.substr(0, colon);
    auto port = static_cast<uint16_t>(std::atoi(addr.c_str() + colon + 1));
    auto server = bootstrap::StoreServer::start(host == "localhost" ? "127.0.0.1" : host, port);
    if (!server.ok()) return server.status().with_context("rank 0 hosting the store at {}", addr);
    w->server_ = std::move(server).value();
    addr = w->server_->address();
  }
  auto client = bootstrap::StoreClient::connect(addr, w->timeout_);
  if (!client.ok()) return client.status().with_context("rank {}: rendezvous store", w->info_.rank);
  w->store_ = std::move(client).value();
  int64_t t2 = now_ns();

  ContextOptions co;
  co.rank = w->info_.rank;
  co.bind_address = options.bind_address;
  PODNET_ASSIGN_OR_RETURN(w->ctx_, Context::create(co));
  int64_t t3 = now_ns();

  PODNET_RETURN_IF_ERROR(w->store_->set(fmt::format("podnet/addr/{}", w->info_.rank), w->ctx_->address()));
  w->addresses_.resize(w->info_.world_size);
  w->peers_.resize(w->info_.world_size);
  for (int r = 0; r < w->info_.world_size; ++r) {
    auto a = w->store_->wait_get(fmt::format("podnet/addr/{}", r), w->timeout_);
    if (!a.ok()) return a.status().with_context("rank {}: waiting for the address of rank {}", w->info_.rank, r);
    w->addresses_[r] = std::move(a).value();
  }
  // What every rank derives alike from the addresses (both stay false if one does not parse;
  // connecting to that rank reports it).
  std::vector<detail::PeerAddress> parsed;
  for (const std::string& blob : w->addresses_)
    if (auto pa = detail::parse_address(blob); pa.ok()) parsed.push_back(std::move(pa).value());
  if (parsed.size() == w->addresses_.size()) {
    w->slow_links_ = std::all_of(parsed.begin(), parsed.end(),
                                 [](const detail::PeerAddress& a) { return bootstrap::is_slow_link(a.link_mbps); });
    w->oversubscribed_ = detail::one_host_oversubscribed(parsed, ::sysconf(_SC_NPROCESSORS_ONLN));
  }
  int64_t t4 = now_ns();
  if (options.connect_all) {
    for (int r = 0; r < w->info_.world_size; ++r) PODNET_RETURN_IF_ERROR(w->peer(r).status());
    // Established before the barrier: after it, every peer has this side's streams too, so
    // each endpoint knows which connection to send on (tcp: the one both directions share).
    const int64_t deadline = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(w->timeout_).count();
    for (int r = 0; r < w->info_.world_size; ++r) {
      auto* ep = dynamic_cast<detail::EndpointImpl*>(w->peers_[r].get());
      if (ep != nullptr) PODNET_RETURN_IF_ERROR(ep->wait_connected(deadline).with_context("rank {}", w->info_.rank));
    }
  }
  PODNET_RETURN_IF_ERROR(w->barrier("podnet/init"));
  int64_t t5 = now_ns();
  PODNET_INFO(kBoot,
              "rank {} of {} ({}) ready: detect {} us, store {} us, context {} us, address exchange {} us, "
              "connect+barrier {} us; listening on {}",
              w->info_.rank, w->info_.world_size, w->info_.launcher, (t1 - t0) / 1000, (t2 - t1) / 1000,
              (t3 - t2) / 1000, (t4 - t3) / 1000, (t5 - t4) / 1000, w->ctx_->listen_address());
  return w;
}

World::~World() {
  // Everyone leaves together so that no rank sees its peers vanish as a failure.
  bool healthy = store_ && ctx_;
  for (auto& p : peers_)
    if (p && !p->health().ok()) healthy = false;
  if (healthy) (void)barrier("podnet/exit");
  peers_.clear();
  ctx_.reset();
  store_.reset();
  server_.reset();
}

Result<std::shared_ptr<Endpoint>> World::peer(int r) {
  if (r < 0 || r >= size()) return Status::InvalidArgument("rank {} is outside the world of {} ranks", r, size());
  std::lock_guard lk(peer_mu_);
  if (!peers_[r]) {
    auto ep = ctx_->connect(addresses_[r]);
    if (!ep.ok()) return ep.status();
    peers_[r] = std::move(ep).value();
  }
  return peers_[r];
}

Status World::barrier(const std::string& name) {
  return store_->barrier(name, size(), timeout_).with_context("rank {}: barrier '{}'", rank(), name);
}

}  // namespace podnet
