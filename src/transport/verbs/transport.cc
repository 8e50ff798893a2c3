#include "transport/verbs/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "transport/verbs/endpoint.h"

namespace podnet::verbs {
namespace {
constexpr char kBye = 'B';   // sent on the setup socket by a context that closes on purpose
constexpr char kBeat = 'H';  // heartbeat on the setup socket
}  // namespace

class VerbsTransport::Listener : public detail::EventHandler {
 public:
  explicit Listener(VerbsTransport* t) : t_(t) {}
  void on_event(uint32_t) override { t_->accept_ready(); }
  bool spin_target() const noexcept override { return false; }

 private:
  VerbsTransport* t_;
};

// The completion channel: an event means some CQ had a completion while armed. Draining it
// is enough; the engine runs the pollers (this transport) right after any event.
class VerbsTransport::Channel : public detail::EventHandler {
 public:
  explicit Channel(ibv_comp_channel* ch) : ch_(ch) {}
  void on_event(uint32_t) override {
    ibv_cq* cq;
    void* ctx;
    while (ibv_get_cq_event(ch_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  }
  bool spin_target() const noexcept override { return false; }

 private:
  ibv_comp_channel* ch_;
};

// One connection-setup socket: connecting (outgoing), waiting for the reply (outgoing) or
// the hello (incoming), then watching for the peer to go away.
class VerbsTransport::Oob : public detail::EventHandler {
 public:
  enum class State { kConnecting, kAwaitReply, kAwaitHello, kWatching, kClosed };
  Oob(VerbsTransport* t, int fd, State s, std::weak_ptr<VerbsEndpoint> ep, std::string peer)
      : t_(t), fd_(fd), state_(s), ep_(std::move(ep)), peer_(std::move(peer)) {}
  ~Oob() override { close_fd(); }
  void on_event(uint32_t events) override {
    std::unique_lock lk(mu_, std::try_to_lock);
    if (lk.owns_lock()) t_->on_oob(this, events);
  }
  bool spin_target() const noexcept override { return false; }
  void close_fd() {
    if (fd_ >= 0) {
      t_->engine().remove(fd_, this);
      ::close(fd_);
      fd_ = -1;
    }
    state_ = State::kClosed;
  }

  VerbsTransport* t_;
  int fd_;
  State state_;
  std::weak_ptr<VerbsEndpoint> ep_;
  std::string peer_;  // ip:port, for errors
  Hello out_{};       // kConnecting: the hello to send
  std::byte in_[sizeof(Hello)];
  size_t got_ = 0;
  bool bye_ = false;  // the peer said it closes its context on purpose
  int64_t last_rx_ns_ = 0, last_tx_ns_ = 0;
  std::mutex mu_;
};

VerbsTransport::VerbsTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id,
                               int rank, const VerbsOptions& options)
    : engine_(engine), registry_(registry), ctx_id_(ctx_id), rank_(rank), options_(options) {}

Result<std::unique_ptr<VerbsTransport>> VerbsTransport::create(detail::ProgressEngine& engine,
                                                               detail::MemoryRegistry& registry, uint64_t ctx_id,
                                                               int rank, const VerbsOptions& o) {
  if (o.recv_depth < 4 || o.recv_depth > 16384)
    return Status::InvalidArgument("PODNET_VERBS_RECV_DEPTH={}: expected 4 .. 16384", o.recv_depth);
  if (o.sq_depth < 8 || o.sq_depth > 16384)
    return Status::InvalidArgument("PODNET_VERBS_SQ_DEPTH={}: expected 8 .. 16384", o.sq_depth);
  if (o.eager_max < 64 || o.eager_max > (1u << 20))
    return Status::InvalidArgument("PODNET_VERBS_EAGER_MAX={}: expected 64 .. 1M", o.eager_max);
  if (o.inline_bytes > kMaxInline)
    return Status::InvalidArgument("PODNET_VERBS_INLINE={}: expected 0 .. {}", o.inline_bytes, kMaxInline);
  // Larger than the send queue is harmless: a nearly full queue signals anyway.
  if (o.signal_every < 1 || o.signal_every > 16384)
    return Status::InvalidArgument("PODNET_VERBS_SIGNAL_EVERY={}: expected 1 .. 16384", o.signal_every);
  if (o.qps < 1 || o.qps > static_cast<int>(kMaxLanes) + 1)
    return Status::InvalidArgument("PODNET_VERBS_QPS={}: expected 1 .. {}", o.qps, kMaxLanes + 1);
  if (o.ack_timeout < 1 || o.ack_timeout > 31 || o.retry_count < 0 || o.retry_count > 7)
    return Status::InvalidArgument("PODNET_VERBS_TIMEOUT={} / PODNET_VERBS_RETRY={}: expected 1..31 / 0..7",
                                   o.ack_timeout, o.retry_count);
  std::unique_ptr<VerbsTransport> t(new VerbsTransport(engine, registry, ctx_id, rank, o));
  PODNET_ASSIGN_OR_RETURN(t->device_, open_device(o));
  Device& d = *t->device_;
  if (o.sq_depth > d.max_qp_wr || 2 * o.recv_depth + 16 > d.max_qp_wr)
    return Status::InvalidArgument("{}: queue depths (PODNET_VERBS_SQ_DEPTH={}, 2 x PODNET_VERBS_RECV_DEPTH={}) exceed "
                                   "the device's {} work requests",
                                   d.name, o.sq_depth, 2 * o.recv_depth, d.max_qp_wr);
  t->chunk_ = o.chunk == 0 ? d.max_msg : std::min<size_t>(o.chunk, d.max_msg);
  VerbsTransport* raw = t.get();
  t->mrs_ = std::make_unique<MrCache>(d, registry, [raw](uint64_t key) { raw->revoke(key); });
  t->channel_ = ibv_create_comp_channel(d.ctx);
  if (t->channel_ == nullptr) return Status::Unavailable("{}: ibv_create_comp_channel: {}", d.name, std::strerror(errno));
  fcntl(t->channel_->fd, F_SETFL, fcntl(t->channel_->fd, F_GETFL) | O_NONBLOCK);

  // The setup socket listens on the GID's own address: reaching it means the peer reaches
  // this device's network.
  t->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t->listen_fd_ < 0) return Status::Unavailable("verbs: socket: {}", std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, d.ipv4.c_str(), &sa.sin_addr);
  if (bind(t->listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(t->listen_fd_, 1024) != 0)
    return Status::Unavailable("verbs: listen on {} (the address of {}'s GID): {}", d.ipv4, d.name,
                               std::strerror(errno));
  socklen_t len = sizeof sa;
  getsockname(t->listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  t->listen_port_ = ntohs(sa.sin_port);
  t->lists_.push_back(std::make_unique<const EndpointList>());
  t->list_.store(t->lists_.back().get(), std::memory_order_release);
  t->listener_ = std::make_unique<Listener>(raw);
  t->channel_handler_ = std::make_unique<Channel>(t->channel_);
  PODNET_RETURN_IF_ERROR(engine.add(t->listen_fd_, EPOLLIN, t->listener_.get()));
  PODNET_RETURN_IF_ERROR(engine.add(t->channel_->fd, EPOLLIN, t->channel_handler_.get()));
  PODNET_RETURN_IF_ERROR(engine.add_poller(raw));
  engine.add_housekeeping([raw] { raw->housekeeping(); });
  return t;
}

VerbsTransport::~VerbsTransport() {
  shutdown();
  {
    std::lock_guard lk(mu_);
    for (auto& o : oobs_) o->close_fd();
    for (auto& [id, ep] : endpoints_) ep->release_resources();  // before the device goes
  }
  if (listen_fd_ >= 0) {
    engine_.remove(listen_fd_, listener_.get());
    close(listen_fd_);
  }
  if (channel_) {
    engine_.remove(channel_->fd, channel_handler_.get());
    ibv_destroy_comp_channel(channel_);
  }
  mrs_.reset();
}

detail::Capabilities VerbsTransport::caps() const noexcept { return {}; }

double VerbsTransport::retry_budget_ms() const {
  return 4.096e-3 * std::ldexp(1.0, options_.ack_timeout) * (options_.retry_count + 1);
}

std::string VerbsTransport::address() const {
  VerbsAddress a;
  a.device = device_->name;
  a.port = device_->port;
  a.gid_index = device_->gid_index;
  a.gid = gid_hex(device_->gid);
  a.mtu = static_cast<int>(device_->port_attr.active_mtu);
  a.family = device_->family;
  a.oob = fmt::format("{}:{}", device_->ipv4, listen_port_);
  return format_verbs_address(a);
}

std::shared_ptr<VerbsEndpoint> VerbsTransport::endpoint_for(uint64_t peer_id, int rank, const std::string& host) {
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(peer_id);
  if (it != endpoints_.end()) return it->second;
  auto ep = std::make_shared<VerbsEndpoint>(this, peer_id, rank, host);
  endpoints_[peer_id] = ep;
  auto list = std::make_unique<EndpointList>(*list_.load(std::memory_order_relaxed));
  list->push_back(ep.get());
  lists_.push_back(std::move(list));
  list_.store(lists_.back().get(), std::memory_order_release);
  return ep;
}

Result<std::shared_ptr<detail::TransportEndpoint>> VerbsTransport::connect(uint64_t peer_id, int peer_rank,
                                                                           std::string_view peer_address) {
  PODNET_ASSIGN_OR_RETURN(auto a, parse_verbs_address(peer_address));
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return Status::Cancelled("verbs transport is shut down");
  }
  auto ep = endpoint_for(peer_id, peer_rank, a.oob.substr(0, a.oob.rfind(':')));
  if (!ep->request_started()) {
    if (Status st = start_oob(ep, a); !st.ok()) ep->fail(st);
  }
  return std::shared_ptr<detail::TransportEndpoint>(ep);
}

Status VerbsTransport::start_oob(const std::shared_ptr<VerbsEndpoint>& ep, const VerbsAddress& peer) {
  auto hello = ep->start_request_qp();
  if (!hello.ok()) return hello.status().code() == Code::kCancelled ? Status() : hello.status();
  std::string ip = peer.oob.substr(0, peer.oob.rfind(':'));
  int port = std::atoi(peer.oob.c_str() + peer.oob.rfind(':') + 1);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) return Status::InvalidArgument("bad verbs setup address '{}'", peer.oob);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("verbs: socket: {}", std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return Status::PeerFailed("connect to the verbs setup socket {}: {}", peer.oob, std::strerror(err));
  }
  auto oob = std::make_unique<Oob>(this, fd, Oob::State::kConnecting, ep, peer.oob);
  oob->out_ = *hello;
  Oob* raw = oob.get();
  {
    std::lock_guard lk(mu_);
    oobs_.push_back(std::move(oob));
  }
  return engine_.add(fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, raw);
}

void VerbsTransport::accept_ready() {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        PODNET_WARN(kNet, "verbs: accept: {}", std::strerror(errno));
      return;
    }
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    auto oob = std::make_unique<Oob>(this, fd, Oob::State::kAwaitHello, std::weak_ptr<VerbsEndpoint>(),
                                     fmt::format("{}:{}", ip, ntohs(sa.sin_port)));
    Oob* raw = oob.get();
    {
      std::lock_guard lk(mu_);
      oobs_.push_back(std::move(oob));
    }
    if (Status st = engine_.add(fd, EPOLLIN | EPOLLRDHUP, raw); !st.ok()) {
      PODNET_WARN(kNet, "verbs: {}", st.message());
      raw->close_fd();
    }
  }
}

// Runs with the Oob's own lock held (one thread at a time per socket).
void VerbsTransport::on_oob(Oob* o, uint32_t events) {
  auto ep = o->ep_.lock();
  auto lost = [&](const Status& why) {
    o->close_fd();
    if (!ep) return;
    // What the peer sent before it went is in the completion queue (its NIC had our
    // acknowledgement): handled before the endpoint fails, or those receives fail too.
    ep->drain_departed();
    ep->fail(why, o->bye_);
  };
  if (o->state_ == Oob::State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(o->fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP)))
      return lost(Status::PeerFailed("connect to the verbs setup socket {}: {}", o->peer_,
                                     std::strerror(err ? err : ECONNREFUSED)));
    if (!(events & EPOLLOUT)) return;
    if (::send(o->fd_, &o->out_, sizeof o->out_, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof o->out_))
      return lost(Status::PeerFailed("send hello to {}: {}", o->peer_, std::strerror(errno)));
    o->state_ = Oob::State::kAwaitReply;
    engine_.modify(o->fd_, EPOLLIN | EPOLLRDHUP, o);
    return;
  }
  if (o->state_ == Oob::State::kClosed) return;
  o->last_rx_ns_ = now_ns();
  // Read what is there; a setup record is complete at sizeof(Hello).
  for (;;) {
    std::byte buf[sizeof(Hello)];
    bool collecting = o->state_ != Oob::State::kWatching;
    size_t want = collecting ? sizeof(Hello) - o->got_ : sizeof buf;
    ssize_t n = ::recv(o->fd_, collecting ? o->in_ + o->got_ : buf, want, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      Status why = o->bye_ ? Status::PeerFailed("the peer closed its context")
                   : o->state_ == Oob::State::kWatching
                       ? Status::PeerFailed("the peer process exited or closed its context (its verbs setup socket "
                                            "{} closed)",
                                            o->peer_)
                       : Status::PeerFailed("the verbs setup socket {} closed before the handshake finished",
                                            o->peer_);
      return lost(why);
    }
    if (n < 0) return;
    if (!collecting) {  // after the handshake only a goodbye comes
      if (std::memchr(buf, kBye, static_cast<size_t>(n)) != nullptr) o->bye_ = true;
      continue;
    }
    o->got_ += static_cast<size_t>(n);
    if (o->got_ < sizeof(Hello)) continue;
    o->got_ = 0;
    auto h = decode_hello(o->in_, sizeof(Hello));
    if (!h.ok()) return lost(h.status().with_context("from {}", o->peer_));
    if (o->state_ == Oob::State::kAwaitReply) {
      if (h->kind == Hello::kRefuse) return lost(Status::PeerFailed("the peer refused the connection: {}", h->why));
      o->state_ = Oob::State::kWatching;
      if (ep) ep->on_reply(*h).ok();  // a failure fails the endpoint
      continue;
    }
    // kAwaitHello: the peer's request QP wants our serve QP.
    std::string host = o->peer_.substr(0, o->peer_.rfind(':'));
    ep = endpoint_for(h->ctx_id, h->rank, host);
    o->ep_ = ep;
    auto reply = ep->accept_serve_qp(*h);
    if (!reply.ok()) {
      PODNET_WARN(kNet, "verbs: refused rank {} ({}): {}", h->rank, host, reply.status().message());
      Hello refuse;
      refuse.kind = Hello::kRefuse;
      std::snprintf(refuse.why, sizeof refuse.why, "%s", reply.status().message().c_str());
      ssize_t w = ::send(o->fd_, &refuse, sizeof refuse, MSG_NOSIGNAL);
      (void)w;
      o->close_fd();
      return;
    }
    if (::send(o->fd_, &*reply, sizeof *reply, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof *reply))
      return lost(Status::PeerFailed("send the hello reply to {}: {}", o->peer_, std::strerror(errno)));
    o->state_ = Oob::State::kWatching;
    PODNET_INFO(kNet, "verbs: {} connected its queue pair to ours", ep->peer_name());
  }
}

int VerbsTransport::poll() {
  int n = 0;
  for (VerbsEndpoint* ep : list()) n += ep->poll();
  return n;
}

bool VerbsTransport::arm() {
  for (VerbsEndpoint* ep : list())
    if (!ep->arm()) return false;
  return true;
}

// Liveness of the peer process and host, independent of the NIC (soft-RoCE in particular
// never reports "retry exceeded" for a vanished host): every established setup socket
// carries a heartbeat byte each PODNET_HEARTBEAT_MS, written by this background tick, so a
// peer that is gone, unreachable or frozen falls silent and fails after PODNET_PEER_TIMEOUT_MS.
void VerbsTransport::housekeeping() {
  int64_t now = now_ns();
  for (VerbsEndpoint* ep : list()) ep->tick(now);
  std::vector<Oob*> oobs;
  {
    std::lock_guard lk(mu_);
    for (auto& o : oobs_) oobs.push_back(o.get());
  }
  for (Oob* o : oobs) {
    std::unique_lock olk(o->mu_, std::try_to_lock);
    if (!olk.owns_lock() || o->state_ != Oob::State::kWatching) continue;
    if (o->last_rx_ns_ == 0) o->last_rx_ns_ = now;
    if (now - o->last_tx_ns_ >= int64_t{options_.heartbeat_ms} * 1000000) {
      ssize_t w = ::send(o->fd_, &kBeat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
      o->last_tx_ns_ = now;
    }
    if (now - o->last_rx_ns_ > int64_t{options_.peer_timeout_ms} * 1000000) {
      auto ep = o->ep_.lock();
      int64_t silent_ms = (now - o->last_rx_ns_) / 1000000;
      o->close_fd();
      if (ep)
        ep->fail(Status::PeerFailed("no heartbeat for {} ms on the verbs setup socket {} (PODNET_PEER_TIMEOUT_MS={}): "
                                    "the peer host is down, unreachable, or the process is frozen",
                                    silent_ms, o->peer_, options_.peer_timeout_ms));
    }
  }
}

void VerbsTransport::revoke(uint64_t key) {
  for (VerbsEndpoint* ep : list()) ep->revoke(key);
}

void VerbsTransport::shutdown() {
  std::unordered_map<uint64_t, std::shared_ptr<VerbsEndpoint>> eps;
  std::vector<Oob*> oobs;
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    eps = endpoints_;
    for (auto& o : oobs_) oobs.push_back(o.get());
  }
  // What the endpoints queued leaves before the goodbye: their eager sends completed when
  // copied, and the peer's receives count on them. Bounded: a peer that stopped taking
  // messages holds this up detail::kCloseFlushNs at most.
  detail::wait_to_close([&] {
    bool quiet = true;
    for (auto& [id, ep] : eps) quiet = ep->quiet_for_close() && quiet;  // each one a step
    return quiet;
  });
  for (Oob* o : oobs) {  // the peers see a goodbye, then the socket close
    std::lock_guard olk(o->mu_);
    if (o->state_ == Oob::State::kWatching) {
      ssize_t w = ::send(o->fd_, &kBye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
    }
    o->close_fd();
  }
  for (auto& [id, ep] : eps) ep->fail(Status::Cancelled("the local context is shutting down"));
}

Result<std::unique_ptr<detail::Transport>> create_verbs_transport(detail::ProgressEngine& engine,
                                                                  detail::MemoryRegistry& registry, uint64_t ctx_id,
                                                                  int rank, const VerbsOptions& options) {
  PODNET_ASSIGN_OR_RETURN(auto t, VerbsTransport::create(engine, registry, ctx_id, rank, options));
  return std::unique_ptr<detail::Transport>(std::move(t));
}

}  // namespace podnet::verbs
