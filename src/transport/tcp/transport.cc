#include "transport/tcp/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/endpoint.h"

namespace podnet::tcp {
namespace {
// A closed connection is freed this long after it closed: another thread may still be
// inside its event handler, and epoll can report an event that was already queued.
constexpr int64_t kGraveyardNs = 5'000'000'000;

Result<std::pair<std::string, uint16_t>> split_host_port(std::string_view s) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return Status::InvalidArgument("'{}' is not host:port", s);
  unsigned port = 0;
  auto p = s.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port == 0 || port > 65535)
    return Status::InvalidArgument("'{}' has no valid port", s);
  return std::make_pair(std::string(s.substr(0, colon)), static_cast<uint16_t>(port));
}
}  // namespace

class TcpTransport::Listener : public detail::EventHandler {
 public:
  Listener(TcpTransport* t, int fd) : t_(t), fd_(fd) {}
  ~Listener() override { close(fd_); }
  void on_event(uint32_t) override { t_->accept_ready(fd_); }
  bool spin_target() const noexcept override { return false; }  // accept() is not worth spinning on
  int fd() const { return fd_; }

 private:
  TcpTransport* t_;
  const int fd_;
};

TcpTransport::TcpTransport(detail::ProgressEngine& engine, detail::MemoryRegistry& registry, uint64_t ctx_id,
                           int rank, const TcpOptions& options)
    : engine_(engine), registry_(registry), ctx_id_(ctx_id), rank_(rank), options_(options) {}

Result<std::unique_ptr<TcpTransport>> TcpTransport::create(detail::ProgressEngine& engine,
                                                           detail::MemoryRegistry& registry, uint64_t ctx_id, int rank,
                                                           const std::string& bind_ips, uint16_t port,
                                                           const TcpOptions& options) {
  if (options.streams < 1 || options.streams > 64)
    return Status::InvalidArgument("PODNET_TCP_STREAMS={} must be between 1 and 64 (or 0: auto)", options.streams);
  std::unique_ptr<TcpTransport> t(new TcpTransport(engine, registry, ctx_id, rank, options));
  std::string_view rest = bind_ips;
  while (true) {
    size_t comma = rest.find(',');
    PODNET_RETURN_IF_ERROR(t->listen_on(std::string(rest.substr(0, comma)), port));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (t->listeners_.size() > kMaxRails)
    return Status::InvalidArgument("tcp: {} interfaces given; at most {} rails", t->listeners_.size(), kMaxRails);
  TcpTransport* raw = t.get();
  engine.add_housekeeping([raw] { raw->housekeeping(); });
  engine.set_deferred_flush([raw] { raw->flush_deferred(); }, options.ack_delay_us * 1000ll);
  PODNET_INFO(kNet, "tcp listening on {}", t->listen_);
  return t;
}

Status TcpTransport::listen_on(const std::string& ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("tcp: socket: {}", std::strerror(errno));
  auto listener = std::make_unique<Listener>(this, fd);  // owns fd from here on
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1)
    return Status::InvalidArgument("tcp: '{}' is not an IPv4 address", ip);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Status::Unavailable("tcp: bind {}:{}: {}", ip, port, std::strerror(errno));
  if (listen(fd, 1024) != 0) return Status::Unavailable("tcp: listen: {}", std::strerror(errno));
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  listen_ += fmt::format("{}{}:{}", listen_.empty() ? "" : ",", ip, ntohs(sa.sin_port));
  PODNET_RETURN_IF_ERROR(engine_.add(fd, EPOLLIN, listener.get()));
  listeners_.push_back(std::move(listener));
  return {};
}

TcpTransport::~TcpTransport() { shutdown(); }

void TcpTransport::defer(const std::shared_ptr<Connection>& c) {
  {
    std::lock_guard lk(deferred_mu_);
    deferred_.push_back(c);
  }
  engine_.note_deferred();
}

void TcpTransport::flush_deferred() {
  std::vector<std::weak_ptr<Connection>> held;
  {
    std::lock_guard lk(deferred_mu_);
    held.swap(deferred_);
  }
  for (auto& w : held)
    if (auto c = w.lock()) c->flush_deferred();
}

void TcpTransport::accept_ready(int listen_fd) {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        PODNET_WARN(kNet, "tcp: accept: {}", std::strerror(errno));
      return;
    }
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    // Adopted before anyone else can see it: shutdown() fails every connection in live_ from
    // another thread, and adopt() writes the fields fail() reads (ThreadSanitizer caught
    // the two interleaved when the listed connection was adopted after it was listed).
    auto c = std::make_shared<Connection>(this, /*outgoing=*/false, -1);
    if (Status st = c->adopt(fd, fmt::format("{}:{}", ip, ntohs(sa.sin_port))); !st.ok()) {
      c->fail(st);
      continue;
    }
    bool shut;
    {
      std::lock_guard lk(mu_);
      shut = shut_down_;
      // Once adopted its events may already have failed it (and retired it): not listed then.
      if (!shut && c->state() != Connection::State::kClosed) live_.push_back(c);
    }
    if (shut) {
      c->fail(Status::Cancelled("shutdown"), false);
      return;
    }
  }
}

std::string TcpTransport::hello_body(int stream, const TcpEndpoint* ep) const {
  HelloBody h;
  h.ctx_id = ctx_id_;
  h.rank = rank_;
  h.stream = static_cast<uint16_t>(stream);
  h.nstreams = static_cast<uint16_t>(ep != nullptr ? ep->stream_count() : static_cast<size_t>(options_.streams));
  h.listen = listen_;
  return encode_hello(h);
}

std::shared_ptr<TcpEndpoint> TcpTransport::endpoint_for(uint64_t peer_id, int rank, const std::string& listen) {
  std::lock_guard lk(mu_);
  auto& ep = endpoints_[peer_id];
  if (!ep) ep = std::make_shared<TcpEndpoint>(this, peer_id, rank, listen);
  return ep;
}

Status TcpTransport::on_hello(const std::shared_ptr<Connection>& c, const HelloBody& hello) {
  auto ep = endpoint_for(hello.ctx_id, hello.rank, hello.listen);
  PODNET_RETURN_IF_ERROR(ep->attach_incoming(c, hello));
  FrameHeader ack;
  ack.type = FrameType::kHelloAck;
  ack.a = ctx_id_;
  ack.b = static_cast<uint64_t>(rank_);
  c->mark_open(&ack);  // the endpoint may already have queued sends behind it
  PODNET_DEBUG(kNet, "accepted stream {} of rank {} ({})", hello.stream, hello.rank, hello.listen);
  return {};
}

Result<std::shared_ptr<detail::TransportEndpoint>> TcpTransport::connect(uint64_t peer_id, int peer_rank,
                                                                         std::string_view peer_address) {
  std::vector<std::pair<std::string, uint16_t>> rails;  // the peer's listeners
  for (std::string_view rest = peer_address;;) {
    size_t comma = rest.find(',');
    PODNET_ASSIGN_OR_RETURN(auto hp, split_host_port(rest.substr(0, comma)));
    rails.push_back(std::move(hp));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (rails.size() > kMaxRails)
    return Status::InvalidArgument("'{}': {} rails, at most {}", peer_address, rails.size(), kMaxRails);
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return Status::Cancelled("tcp transport is shut down");
  }
  auto ep = endpoint_for(peer_id, peer_rank, std::string(peer_address));
  if (!ep->has_outgoing()) PODNET_RETURN_IF_ERROR(ep->start_outgoing(rails));
  return std::shared_ptr<detail::TransportEndpoint>(ep);
}

void TcpTransport::track(const std::shared_ptr<Connection>& c) {
  std::lock_guard lk(mu_);
  live_.push_back(c);
}

void TcpTransport::retire(const std::shared_ptr<Connection>& c) {
  std::lock_guard lk(mu_);
  auto it = std::find(live_.begin(), live_.end(), c);
  if (it != live_.end()) live_.erase(it);
  graveyard_.emplace_back(now_ns(), c);
}

void TcpTransport::housekeeping() {
  std::vector<std::shared_ptr<TcpEndpoint>> eps;
  std::vector<std::shared_ptr<Connection>> handshaking;
  int64_t now = now_ns();
  {
    std::lock_guard lk(mu_);
    for (auto& [id, ep] : endpoints_) eps.push_back(ep);
    for (auto& c : live_)
      if (c->endpoint() == nullptr) handshaking.push_back(c);
    while (!graveyard_.empty() && now - graveyard_.front().first > kGraveyardNs) graveyard_.pop_front();
  }
  for (auto& ep : eps) ep->tick(now);
  for (auto& c : handshaking) c->tick(now);
}

void TcpTransport::shutdown() {
  std::vector<std::shared_ptr<TcpEndpoint>> eps;
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard lk(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [id, ep] : endpoints_) eps.push_back(ep);
    conns = live_;
  }
  for (auto& ep : eps) ep->close_gracefully();
  // Zero-copy frames read the user's pages until the kernel has sent them: a peer that reads
  // gets them, and the goodbyes behind them, within detail::kCloseFlushNs; the connections
  // of one that does not are reset when they fail (Connection::fail), unsent frames dropped.
  detail::wait_to_close([&] {
    bool pending = false;
    for (auto& c : conns) pending = c->zerocopy_pending() || pending;  // each flushes
    return !pending;
  });
  for (auto& ep : eps) ep->fail(Status::Cancelled("the local context was shut down"));
  for (auto& c : conns) c->fail(Status::Cancelled("shutdown"), false);
  for (auto& l : listeners_) engine_.remove(l->fd(), l.get());
}

}  // namespace podnet::tcp
