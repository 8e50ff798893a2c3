#include "transport/shm/transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include "base/clock.h"
#include "base/log.h"
#include "transport/shm/channel.h"
#include "transport/shm/endpoint.h"
#include "transport/shm/ptracer.h"

namespace podnet::shm {
namespace {
constexpr unsigned kLocalPollEvery = 8;
// poll()'s turns on this thread: counted per thread, so the spin loop writes no shared line.
thread_local unsigned t_poll_turn = 0;
}  // namespace

std::string local_host_id() {
  if (const char* env = std::getenv("PODNET_HOST_ID"); env != nullptr && *env != '\0') return env;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  unsigned long netns = stat("/proc/self/ns/net", &st) == 0 ? static_cast<unsigned long>(st.st_ino) : 0;
  return fmt::format("{}-{}-{}", host, boot.substr(0, 8), netns);
}

Result<ShmAddress> parse_shm_address(std::string_view s) {
  size_t c1 = s.find(','), c2 = c1 == std::string_view::npos ? c1 : s.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return Status::InvalidArgument("bad shm address '{}'", s);
  ShmAddress a;
  a.host_id = s.substr(0, c1);
  auto pid = s.substr(c1 + 1, c2 - c1 - 1);
  auto [p, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), a.pid);
  if (ec != std::errc() || p != pid.data() + pid.size()) return Status::InvalidArgument("bad shm address pid '{}'", pid);
  a.socket = s.substr(c2 + 1);
  return a;
}

class ShmTransport::Listener : public detail::EventHandler {
 public:
  explicit Listener(ShmTransport* t) : t_(t) {}
  void on_event(uint32_t) override { t_->accept_ready(); }
  bool spin_target() const noexcept override { return false; }

 private:
  ShmTransport* t_;
};

// Drains the eventfd; the engine runs the pollers right after any event.
class ShmTransport::Doorbell : public detail::EventHandler {
 public:
  explicit Doorbell(int fd) : fd_(fd) {}
  void on_event(uint32_t) override {
    uint64_t v;
    ssize_t n = read(fd_, &v, sizeof v);
    (void)n;
  }
  bool spin_target() const noexcept override { return false; }

 private:
  int fd_;
};

// A just-accepted socket, waiting for its hello.
class ShmTransport::PendingAccept : public detail::EventHandler {
 public:
  PendingAccept(ShmTransport* t, int sock) : t_(t), fd(sock) {}
  void on_event(uint32_t) override {
    if (!done.exchange(true)) t_->on_hello(this);
  }
  bool spin_target() const noexcept override { return false; }
  ShmTransport* t_;
  int fd;
  std::atomic<bool> done{false};
};

// A channel's socket: the connector gets the reply here; both sides see bye and hang-up.
class ShmTransport::Watch : public detail::EventHandler {
 public:
  Watch(ShmTransport* t, std::shared_ptr<Channel> ch, std::weak_ptr<ShmEndpoint> ep)
      : t_(t), ch_(std::move(ch)), ep_(std::move(ep)) {}
  void on_event(uint32_t events) override {
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock() || closed_) return;
    auto ep = ep_.lock();
    if (!ep) return;
    for (;;) {
      int fds[2];
      auto h = recv_hello(ch_->sock(), fds);
      if (!h.ok()) {
        if (h.status().code() == Code::kTimeout && !(events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) return;
        close_channel(*ep, h.status().code() == Code::kTimeout ? Status::Unavailable("the peer hung up") : h.status());
        return;
      }
      if (h->kind == Hello::kReply) {
        if (fds[1] >= 0) close(fds[1]);
        ep->on_reply(*h, fds[0]);
      } else if (h->kind == Hello::kBye) {
        for (int fd : fds)
          if (fd >= 0) close(fd);
        // The peer is closing its context and waits until this side is done with the records
        // it posted (they name its memory: reads to write into, sends to pull from): handle
        // them, fail, and hang up, which ends its wait.
        ep->set_graceful();
        close_channel(*ep, Status::Unavailable("it said goodbye"), /*peer_waits=*/true);
        ep->hang_up();
        return;
      } else {
        for (int fd : fds)
          if (fd >= 0) close(fd);
      }
    }
  }
  bool spin_target() const noexcept override { return false; }

 private:
  void close_channel(ShmEndpoint& ep, const Status& why, bool peer_waits = false) {
    closed_ = true;
    t_->engine().remove(ch_->sock(), this);
    ep.drain_departed(peer_waits);  // what the peer wrote before it went away still counts
    if (t_->closing_.load(std::memory_order_acquire)) {
      ep.fail(Status::Cancelled("the local context is shutting down (the peer hung up: {})", why.message()));
    } else {
      ep.fail(Status::PeerFailed("the process exited or closed its context ({})", why.message()));
    }
  }

  ShmTransport* t_;
  std::shared_ptr<Channel> ch_;
  std::weak_ptr<ShmEndpoint> ep_;
  std::mutex mu_;
  bool closed_ = false;
};

ShmTransport::ShmTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id,
                           int rank, std::string host_id, const ShmOptions& options)
    : engine_(engine),
      registry_(registry),
      ctx_id_(ctx_id),
      rank_(rank),
      host_id_(std::move(host_id)),
      options_(options) {
  lists_.push_back(std::make_unique<EndpointList>());
  list_.store(lists_.back().get());
}

Result<std::unique_ptr<ShmTransport>> ShmTransport::create(detail::ProgressEngine& engine,
                                                           detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
                                                           std::string host_id, const ShmOptions& options) {
  if (!Channel::valid_sizes(options.ring_bytes, 0))
    return Status::InvalidArgument("PODNET_SHM_RING={} must be a power of two between 64K and 1G", options.ring_bytes);
  if (!Channel::valid_sizes(options.ring_bytes, options.bulk_bytes))
    return Status::InvalidArgument("PODNET_SHM_BULK={} must be 0 or a power of two between 256K and 1G",
                                   options.bulk_bytes);
  PODNET_RETURN_IF_ERROR(declare_ptracer(options.ptracer, /*wanted=*/options.cma || options.map));
  std::unique_ptr<ShmTransport> t(new ShmTransport(engine, registry, ctx_id, rank, std::move(host_id), options));
  t->socket_name_ = fmt::format("podnet-shm-{:016x}", ctx_id);
  t->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t->listen_fd_ < 0) return Status::Unavailable("shm: socket: {}", std::strerror(errno));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, t->socket_name_.data(), t->socket_name_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + t->socket_name_.size());
  if (bind(t->listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0)
    return Status::Unavailable("shm: bind @{}: {}", t->socket_name_, std::strerror(errno));
  if (listen(t->listen_fd_, 1024) != 0) return Status::Unavailable("shm: listen: {}", std::strerror(errno));
  t->doorbell_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->doorbell_ < 0) return Status::Unavailable("shm: eventfd: {}", std::strerror(errno));
  t->listener_ = std::make_unique<Listener>(t.get());
  t->doorbell_handler_ = std::make_unique<Doorbell>(t->doorbell_);
  PODNET_RETURN_IF_ERROR(engine.add(t->listen_fd_, EPOLLIN, t->listener_.get()));
  PODNET_RETURN_IF_ERROR(engine.add(t->doorbell_, EPOLLIN, t->doorbell_handler_.get()));
  PODNET_RETURN_IF_ERROR(engine.add_poller(t.get()));
  ShmTransport* raw = t.get();
  engine.add_housekeeping([raw] { raw->housekeeping(); });
  PODNET_INFO(kNet, "shm listening on @{} (host id {})", t->socket_name_, t->host_id_);
  return t;
}

ShmTransport::~ShmTransport() {
  shutdown();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (doorbell_ >= 0) close(doorbell_);
}

std::string ShmTransport::address() const { return fmt::format("{},{},{}", host_id_, getpid(), socket_name_); }

std::shared_ptr<ShmEndpoint> ShmTransport::endpoint_for(uint64_t peer_id, int rank, const std::string& socket,
                                                        pid_t pid) {
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(peer_id);
  if (it != endpoints_.end()) return it->second;
  auto ep = std::make_shared<ShmEndpoint>(this, peer_id, rank, socket, pid);
  endpoints_[peer_id] = ep;
  lists_.push_back(std::make_unique<EndpointList>(*list_.load()));
  lists_.back()->push_back(ep.get());
  list_.store(lists_.back().get(), std::memory_order_release);
  return ep;
}

Status ShmTransport::watch(const std::shared_ptr<Channel>& ch, const std::shared_ptr<ShmEndpoint>& ep) {
  auto w = std::make_unique<Watch>(this, ch, ep);
  Watch* raw = w.get();
  {
    std::lock_guard lk(mu_);
    handlers_.push_back(std::move(w));
  }
  return engine_.add(ch->sock(), EPOLLIN | EPOLLRDHUP, raw);
}

Result<std::shared_ptr<detail::TransportEndpoint>> ShmTransport::connect(uint64_t peer_id, int peer_rank,
                                                                         std::string_view peer_address) {
  PODNET_ASSIGN_OR_RETURN(auto a, parse_shm_address(peer_address));
  if (a.host_id != host_id_)
    return Status::Unavailable("rank {} is on another host (host id {}, this one {})", peer_rank, a.host_id, host_id_);
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return Status::Cancelled("shm transport is shut down");
  }
  auto ep = endpoint_for(peer_id, peer_rank, a.socket, a.pid);
  auto ch = ep->start_outgoing();
  if (!ch.ok()) return ch.status();
  if (*ch) PODNET_RETURN_IF_ERROR(watch(*ch, ep));
  return std::shared_ptr<detail::TransportEndpoint>(ep);
}

void ShmTransport::accept_ready() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        PODNET_WARN(kNet, "shm: accept: {}", std::strerror(errno));
      return;
    }
    auto p = std::make_unique<PendingAccept>(this, fd);
    PendingAccept* raw = p.get();
    {
      std::lock_guard lk(mu_);
      handlers_.push_back(std::move(p));
    }
    if (Status st = engine_.add(fd, EPOLLIN | EPOLLRDHUP, raw); !st.ok()) {
      PODNET_WARN(kNet, "shm: {}", st.message());
      close(fd);
    }
  }
}

void ShmTransport::on_hello(PendingAccept* p) {
  engine_.remove(p->fd, p);
  int fds[2];
  auto h = recv_hello(p->fd, fds);
  auto drop = [&](const Status& why) {
    PODNET_WARN(kNet, "shm: refused a connection: {}", why.message());
    for (int fd : fds)
      if (fd >= 0) close(fd);
    close(p->fd);
  };
  if (!h.ok()) return drop(h.status());
  if (h->kind != Hello::kHello || fds[0] < 0 || fds[1] < 0) return drop(Status::Protocol("hello without descriptors"));
  auto ch = Channel::accept(p->fd, fds[0], fds[1], h->pid, options_.commit_max);
  if (!ch.ok()) return drop(ch.status());  // the channel closed what it owned
  auto ep = endpoint_for(h->ctx_id, h->rank, fmt::format("podnet-shm-{:016x}", h->ctx_id), h->pid);
  bool cma = options_.cma && probe_cma(h->pid, h->probe_addr, SegmentHeader::kMagic, ep->peer_name());
  (*ch)->set_cma(cma);
  if (Status st = ep->attach_incoming(*ch); !st.ok()) {
    PODNET_WARN(kNet, "shm: {}", st.message());
    return;
  }
  if (Status st = (*ch)->send_reply(cma, doorbell_); !st.ok()) {
    ep->fail(st.with_context("reply to {}", ep->peer_name()));
    return;
  }
  if (Status st = watch(*ch, ep); !st.ok()) ep->fail(st);
  PODNET_INFO(kNet, "shm: {} connected (single-copy {})", ep->peer_name(), cma ? "on" : "off");
}

int ShmTransport::poll() {
  // Every rank has an endpoint to itself, and polling its four rings on every turn of a
  // wait made that wait slower to see what its real peer sent (8 B shm send ping-pong,
  // seven interleaved rounds: median RTT/2 155.5 against 160.5 ns). Records reach such an
  // endpoint only when this process publishes them, so it is polled when the count of
  // those publishes moved, on the turn after one that found work there (a burst longer
  // than one poll takes), and every kLocalPollEvery-th turn regardless: for a record that
  // another thread's poll did not take because it held the ring at that moment.
  const uint64_t pub = Channel::local_publishes();
  const unsigned turn = t_poll_turn++;
  const bool local_due = pub != local_seen_.load(std::memory_order_relaxed) || turn % kLocalPollEvery == 0;
  if (local_due) local_seen_.store(pub, std::memory_order_relaxed);
  int n = 0, local_work = 0;
  for (ShmEndpoint* ep : list()) {
    if (!ep->same_process()) {
      n += ep->poll();
    } else if (local_due) {
      const int w = ep->poll();
      n += w;
      local_work += w;
    }
  }
  if (local_work > 0) local_seen_.store(~uint64_t{0}, std::memory_order_relaxed);  // look again next turn
  return n;
}

bool ShmTransport::arm() {
  for (ShmEndpoint* ep : list())
    if (!ep->arm()) return false;
  return true;
}

void ShmTransport::disarm() {
  for (ShmEndpoint* ep : list()) ep->disarm();
}

void ShmTransport::housekeeping() {
  int64_t now = now_ns();
  for (ShmEndpoint* ep : list()) ep->tick(now);
}

void ShmTransport::shutdown() {
  std::unordered_map<uint64_t, std::shared_ptr<ShmEndpoint>> eps;
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    eps = endpoints_;
  }
  closing_.store(true, std::memory_order_release);
  // Goodbye first, and the operations handed back only once each peer hung up in answer: it
  // handles every record this side posted before (ShmTransport::Watch), and one still
  // reading them could otherwise copy into or out of memory its user already has back. A peer
  // that does not answer within detail::kCloseFlushNs (frozen, gone without a hang-up) is
  // left.
  for (auto& [id, ep] : eps) ep->close_gracefully();
  detail::wait_to_close([&] {
    for (auto& [id, ep] : eps)
      if (ep->awaits_goodbye()) return false;
    return true;
  });
  for (auto& [id, ep] : eps) {
    ep->fail(Status::Cancelled("the local context is shutting down"));
    ep->hang_up();
  }
}

}  // namespace podnet::shm
