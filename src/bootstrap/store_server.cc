// StoreServer: one thread, one epoll set, every connection non-blocking. All state (the
// connections here, the data and pending waits in StoreState) belongs to that thread, so it
// needs no locks; stop() wakes it through an eventfd. A connection that sends anything the
// decoder rejects is dropped, so a port scanner or a confused peer costs one log line.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/log.h"
#include "bootstrap/socket_util.h"
#include "bootstrap/store.h"
#include "bootstrap/store_state.h"
#include "bootstrap/store_wire.h"

namespace podnet::bootstrap {
namespace {

using wire::Frame;
using wire::Type;

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerEvent = 16;         // then let other connections have a turn
constexpr size_t kMaxPendingOut = 64 << 20;   // a client that never reads its replies is dropped
constexpr size_t kMaxDrain = 1 << 20;         // bytes discarded after an error reply before closing
constexpr int kAcceptPauseMs = 100;           // out of descriptors: stop accepting for a moment

struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
  int release() { return std::exchange(fd, -1); }
};

struct Conn {
  int fd = -1;
  uint64_t id = 0;
  std::string peer;  // "ip:port", for log lines
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool greeted = false;     // hello received
  bool closing = false;     // an error reply is queued: flush it, then shut down and drain
  bool draining = false;    // write side shut; discarding input until the peer closes
  size_t drained = 0;
  bool want_write = false;  // EPOLLOUT is armed
  bool dead = false;        // closed at the end of this loop iteration
};

class Server final : public StoreServer {
 public:
  Server(std::string host, uint16_t port, int listen_fd, int epoll_fd, int wake_fd)
      : host_(std::move(host)),
        port_(port),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        state_([this](uint64_t conn, const Frame& reply) { send_to(conn, reply); }) {}
  ~Server() override { stop(); }
  uint16_t port() const noexcept override { return port_; }
  std::string address() const override { return fmt::format("{}:{}", host_, port_); }
  void stop() override;
  void run() { thread_ = std::thread([this] { loop(); }); }

 private:
  void loop();
  void accept_all();
  void on_readable(Conn& c);
  void process_input(Conn& c);
  void handle(Conn& c, Frame& req);
  void send_to(uint64_t conn, const Frame& f);
  void reply(Conn& c, const Frame& f);
  void fail(Conn& c, uint32_t seq, const std::string& why);
  void flush(Conn& c);
  void set_write_interest(Conn& c, bool on);
  void close_conn(uint64_t id);

  const std::string host_;
  const uint16_t port_;
  const int listen_fd_, epoll_fd_, wake_fd_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};

  // Loop-thread state.
  uint64_t next_id_ = 2;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  StoreState state_;
  bool accept_paused_ = false;
};

void Server::stop() {
  if (stopped_.exchange(true)) return;
  uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0)
    PODNET_ERROR(kBoot, "store {}: write to wake eventfd: {}", address(), errno_text(errno));
  if (thread_.joinable()) thread_.join();
  for (auto& [id, c] : conns_) ::close(c->fd);
  conns_.clear();
  ::close(listen_fd_);
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void Server::loop() {
  std::vector<epoll_event> events(64);
  std::vector<uint64_t> dead;
  while (true) {
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), accept_paused_ ? kAcceptPauseMs : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      PODNET_ERROR(kBoot, "store {}: epoll_wait: {}; the store stops serving", address(), errno_text(errno));
      return;
    }
    if (accept_paused_ && n == 0) {
      epoll_event ev{EPOLLIN, {.u64 = kListenId}};
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0) accept_paused_ = false;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;
      if (id == kListenId) { accept_all(); continue; }
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->dead) continue;
      Conn& c = *it->second;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
      if (!c.dead && (events[i].events & EPOLLOUT)) flush(c);
    }
    // Closing waits until here: a wait reply may have marked any connection dead.
    dead.clear();
    for (auto& [id, c] : conns_) if (c->dead) dead.push_back(id);
    for (uint64_t id : dead) close_conn(id);
  }
}

void Server::accept_all() {
  while (true) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      PODNET_WARN(kBoot, "store {}: accept: {}; not accepting for {} ms", address(), errno_text(err), kAcceptPauseMs);
      epoll_event ev{0, {.u64 = kListenId}};
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0) accept_paused_ = true;
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // best effort: latency only
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->id = next_id_++;
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    c->peer = fmt::format("{}:{}", ip, ntohs(sa.sin_port));
    epoll_event ev{EPOLLIN, {.u64 = c->id}};
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      PODNET_WARN(kBoot, "store {}: epoll_ctl add {}: {}", address(), c->peer, errno_text(errno));
      ::close(fd);
      continue;
    }
    PODNET_DEBUG(kBoot, "store {}: client {} connected", address(), c->peer);
    conns_.emplace(c->id, std::move(c));
  }
}

void Server::on_readable(Conn& c) {
  char scratch[4096];
  for (int i = 0; i < kMaxReadsPerEvent && !c.dead; ++i) {
    size_t old = c.in.size();
    char* dst = scratch;
    size_t cap = sizeof scratch;
    if (!c.closing) {
      c.in.resize(old + kReadChunk);
      dst = c.in.data() + old;
      cap = kReadChunk;
    }
    ssize_t n = ::recv(c.fd, dst, cap, 0);
    if (!c.closing) c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      PODNET_DEBUG(kBoot, "store {}: recv from {}: {}", address(), c.peer, errno_text(errno));
      c.dead = true;
      return;
    }
    if (n == 0) {  // peer closed; its pending waits go with it
      PODNET_DEBUG(kBoot, "store {}: client {} disconnected", address(), c.peer);
      c.dead = true;
      return;
    }
    if (c.closing) {  // input after an error reply is discarded, up to a limit
      c.drained += static_cast<size_t>(n);
      if (c.drained > kMaxDrain) c.dead = true;
      continue;
    }
    process_input(c);
  }
}

void Server::process_input(Conn& c) {
  size_t off = 0;
  while (!c.closing && !c.dead) {
    wire::Decoded d = wire::decode(std::string_view(c.in).substr(off));
    if (d.kind == wire::Decoded::Kind::kNeedMore) break;
    if (d.kind == wire::Decoded::Kind::kBad) {
      PODNET_WARN(kBoot, "store {}: dropping client {}: {}", address(), c.peer, d.error.message());
      if (d.bad_magic) {
        c.dead = true;  // not our protocol: nobody to explain anything to
      } else if (d.peer_version != 0) {
        fail(c, 0, fmt::format("store {} speaks protocol version {}, client {} sent version {}", address(),
                               wire::kVersion, c.peer, d.peer_version));
      } else {
        fail(c, 0, d.error.message());
      }
      break;
    }
    off += d.consumed;
    handle(c, d.frame);
  }
  if (c.closing) c.in.clear();
  else c.in.erase(0, off);
}

void Server::handle(Conn& c, Frame& req) {
  if (!wire::is_request(req.type))
    return fail(c, req.seq, fmt::format("client sent a {} frame, which only servers send", wire::type_name(req.type)));
  if (!c.greeted && req.type != Type::kHello)
    return fail(c, req.seq, fmt::format("first frame must be hello, got {}", wire::type_name(req.type)));
  if (req.type == Type::kHello) {
    c.greeted = true;
    return reply(c, {Type::kOk, 0, req.seq, 0, {}});
  }
  Status s = state_.handle(c.id, req);
  if (!s.ok()) fail(c, req.seq, s.message());
}

void Server::send_to(uint64_t conn, const Frame& f) {
  auto it = conns_.find(conn);
  if (it != conns_.end() && !it->second->dead) reply(*it->second, f);
}

void Server::reply(Conn& c, const Frame& f) {
  c.out += wire::encode(f);
  if (c.out.size() - c.out_off > kMaxPendingOut) {
    PODNET_WARN(kBoot, "store {}: dropping client {}: {} bytes of replies unread", address(), c.peer,
                c.out.size() - c.out_off);
    c.dead = true;
    return;
  }
  flush(c);
}

// Answers with an error frame, then closes once it is sent.
void Server::fail(Conn& c, uint32_t seq, const std::string& why) {
  std::string msg = why.substr(0, wire::kMaxErrorBytes);
  reply(c, {Type::kError, 0, seq, static_cast<int64_t>(Code::kProtocol), {std::move(msg)}});
  c.closing = true;
  if (!c.dead) flush(c);
}

void Server::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return set_write_interest(c, true);
      PODNET_DEBUG(kBoot, "store {}: send to {}: {}", address(), c.peer, errno_text(errno));
      c.dead = true;
      return;
    }
    c.out_off += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_off = 0;
  set_write_interest(c, false);
  if (c.closing && !c.draining) {
    // Shut down our side and read until the peer closes: closing with unread input would
    // send a reset that can destroy the error reply before the peer reads it.
    if (::shutdown(c.fd, SHUT_WR) != 0) c.dead = true;
    c.draining = true;
  }
}

void Server::set_write_interest(Conn& c, bool on) {
  if (c.want_write == on || c.dead) return;
  uint32_t events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  epoll_event ev{events, {.u64 = c.id}};
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) != 0) {
    PODNET_WARN(kBoot, "store {}: epoll_ctl mod {}: {}", address(), c.peer, errno_text(errno));
    c.dead = true;
    return;
  }
  c.want_write = on;
}

void Server::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  state_.drop_connection(id);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);  // close() would drop it anyway
  ::close(it->second->fd);
  conns_.erase(it);
}

}  // namespace

Result<std::unique_ptr<StoreServer>> StoreServer::start(const std::string& host, uint16_t port) {
  std::string shown = host.empty() ? "0.0.0.0" : host;
  PODNET_ASSIGN_OR_RETURN(sockaddr_in sa, resolve_ipv4(host, port));
  Fd lfd{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (lfd.fd < 0) return Status::Unavailable("store {}:{}: socket: {}", shown, port, errno_text(errno));
  int one = 1;
  if (setsockopt(lfd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    return Status::Unavailable("store {}:{}: setsockopt SO_REUSEADDR: {}", shown, port, errno_text(errno));
  if (::bind(lfd.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Status::Unavailable("store {}:{}: bind: {}", shown, port, errno_text(errno));
  if (::listen(lfd.fd, SOMAXCONN) != 0)
    return Status::Unavailable("store {}:{}: listen: {}", shown, port, errno_text(errno));
  socklen_t len = sizeof sa;
  if (getsockname(lfd.fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return Status::Unavailable("store {}:{}: getsockname: {}", shown, port, errno_text(errno));
  uint16_t bound = ntohs(sa.sin_port);
  Fd efd{epoll_create1(EPOLL_CLOEXEC)};
  if (efd.fd < 0) return Status::Unavailable("store {}:{}: epoll_create1: {}", shown, bound, errno_text(errno));
  Fd wfd{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  if (wfd.fd < 0) return Status::Unavailable("store {}:{}: eventfd: {}", shown, bound, errno_text(errno));
  epoll_event lev{EPOLLIN, {.u64 = kListenId}};
  epoll_event wev{EPOLLIN, {.u64 = kWakeId}};
  if (epoll_ctl(efd.fd, EPOLL_CTL_ADD, lfd.fd, &lev) != 0 || epoll_ctl(efd.fd, EPOLL_CTL_ADD, wfd.fd, &wev) != 0)
    return Status::Unavailable("store {}:{}: epoll_ctl: {}", shown, bound, errno_text(errno));
  auto server = std::make_unique<Server>(shown, bound, lfd.release(), efd.release(), wfd.release());
  server->run();
  PODNET_INFO(kBoot, "store listening on {}", server->address());
  return std::unique_ptr<StoreServer>(std::move(server));
}

}  // namespace podnet::bootstrap
