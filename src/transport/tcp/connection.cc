#include "transport/tcp/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <linux/errqueue.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/small_vector.h"
#include "base/tsan.h"
#include "transport/request.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/transport.h"

namespace podnet::tcp {
namespace {
constexpr size_t kRxBufSize = 64 * 1024;
// Payload remainders at least this large are received straight into their destination;
// smaller ones go through the receive buffer so that one recv() also picks up the frames
// behind them.
constexpr uint64_t kDirectMin = 8 * 1024;
constexpr int kMaxIov = 64;
constexpr int kReadBudget = 32;
constexpr uint64_t kLowatMax = 128 * 1024;

// The connection whose rx_mu_ this thread holds: fail() runs on the reading thread too.
thread_local const Connection* t_rx_owner = nullptr;
struct RxOwner {
  explicit RxOwner(const Connection* c) : prev(t_rx_owner) { t_rx_owner = c; }
  ~RxOwner() { t_rx_owner = prev; }
  RxOwner(const RxOwner&) = delete;
  RxOwner& operator=(const RxOwner&) = delete;
  const Connection* prev;
};

// The data path's socket calls without glibc's cancellation wrappers (podnet never cancels
// a thread): recv() and sendmsg() switch asynchronous cancellation on and off around the
// system call, ~2 % of the CPU time of a 2-rank 8 B allreduce over loopback (perf).
ssize_t sys_recv(int fd, void* buf, size_t len, int flags) {
  ssize_t r = syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
  if (r > 0) handover_acquire();
  return r;
}
ssize_t sys_sendmsg(int fd, const msghdr* msg, int flags) {
  handover_release();
  return syscall(SYS_sendmsg, fd, msg, flags);
}
}  // namespace

namespace {
// A frame whose payload is text the queue owns (hello, error replies).
std::unique_ptr<TxItem> text_item(FrameHeader h, std::string text) {
  h.length = text.size();
  auto item = std::make_unique<TxItem>();
  encode_header(h, item->hdr);
  item->owned = std::make_shared<std::string>(std::move(text));
  item->payload = reinterpret_cast<const std::byte*>(item->owned->data());
  item->length = item->owned->size();
  return item;
}
}  // namespace

Connection::Connection(TcpTransport* transport, bool outgoing, int stream)
    : transport_(transport), outgoing_(outgoing), stream_(stream),
      state_(outgoing ? State::kConnecting : State::kHandshake), rxbuf_(kRxBufSize) {}

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

void Connection::enable_zerocopy() {
  const auto& o = transport_->options();
  bool loopback = remote_.rfind("127.", 0) == 0;
  bool want = o.zerocopy == TcpOptions::Zerocopy::kOn || (o.zerocopy == TcpOptions::Zerocopy::kAuto && loopback);
  if (!want || o.zerocopy_min == 0) return;
  int one = 1;
  if (setsockopt(fd_, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0) zerocopy_ = true;
  else PODNET_DEBUG(kNet, "SO_ZEROCOPY on {}: {}; sending with copies", remote_, std::strerror(errno));
}

namespace {
// Whether the connection on `fd` runs through the loopback device: a peer at 127.x, or at
// one of this host's own addresses (the local and remote ends then share it).
bool runs_through_loopback(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 || local.ss_family != peer.ss_family)
    return false;
  if (peer.ss_family == AF_INET) {
    const auto& l = reinterpret_cast<const sockaddr_in&>(local).sin_addr;
    const auto& r = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
    return (ntohl(r.s_addr) >> 24) == 127 || l.s_addr == r.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    const auto& l = reinterpret_cast<const sockaddr_in6&>(local).sin6_addr;
    const auto& r = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&r) || std::memcmp(&l, &r, sizeof l) == 0;
  }
  return false;
}
}  // namespace

void Connection::choose_congestion() {
  // BBR, the default on many cloud images (this VM's too), paces every segment from its
  // estimate of a bottleneck that loopback does not have: over loopback it moved 20-31 Gb/s
  // at 1 MiB and 32-45 at 16 MiB where reno moved 47-59 and 56-58, and a 16 MiB 2-rank
  // allreduce took 8.2-8.5 ms against 5.0-5.2 (docs/performance.md). Connections that
  // leave the host keep the system's choice.
  const auto& o = transport_->options();
  loopback_.store(runs_through_loopback(fd_), std::memory_order_relaxed);
  if (o.congestion == "system") return;
  const bool auto_cc = o.congestion == "auto";
  if (auto_cc && !through_loopback()) return;
  const std::string cc = auto_cc ? "reno" : o.congestion;
  if (setsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, cc.data(), static_cast<socklen_t>(cc.size())) != 0)
    PODNET_WARN(kNet, "TCP_CONGESTION {} on the connection to {}: {}; it keeps the system's congestion control", cc,
                remote_, std::strerror(errno));
  else
    PODNET_DEBUG(kNet, "connection to {}: congestion control {}", remote_, cc);
}

Status Connection::open_socket() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Status::Unavailable("socket: {}", std::strerror(errno));
  const auto& o = transport_->options();
  enable_zerocopy();
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (o.sndbuf > 0) {
    int v = static_cast<int>(o.sndbuf);
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
  }
  if (o.rcvbuf > 0) {
    int v = static_cast<int>(o.rcvbuf);
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  }
  return {};
}

void Connection::set_target(const std::string& host, uint16_t port, int64_t deadline_ns) {
  host_ = host;
  port_ = port;
  remote_ = fmt::format("{}:{}", host, port);
  connect_deadline_ns_ = deadline_ns;
  backoff_ns_ = 5'000'000;
}

Status Connection::start_connect() {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port_);
  if (inet_pton(AF_INET, host_.c_str(), &sa.sin_addr) != 1)
    return Status::InvalidArgument("'{}' is not an IPv4 address", host_);
  std::lock_guard rx(rx_mu_);
  RxOwner own(this);
  std::lock_guard tx(tx_mu_);
  PODNET_RETURN_IF_ERROR(open_socket());
  state_.store(State::kConnecting);
  int rc = connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  if (rc != 0 && errno != EINPROGRESS) {
    last_connect_error_ = Status::Unavailable("connect: {}", std::strerror(errno));
    close(fd_);
    fd_ = -1;
    state_.store(State::kBackoff);
    retry_at_ns_ = now_ns() + backoff_ns_;
    return {};
  }
  return transport_->engine().add(fd_, EPOLLIN | EPOLLOUT, this);
}

Status Connection::adopt(int fd, std::string remote) {
  fd_ = fd;
  remote_ = std::move(remote);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  enable_zerocopy();  // read responses go out on accepted connections
  choose_congestion();
  handshake_deadline_ns_ = now_ns() + 10'000'000'000ll;
  last_rx_ns_.store(now_ns());
  state_.store(State::kHandshake);
  return transport_->engine().add(fd_, EPOLLIN, this);
}

void Connection::on_connected() {
  // Called with both locks held after the non-blocking connect finished.
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    last_connect_error_ = Status::Unavailable("connect: {}", std::strerror(err));
    transport_->engine().remove(fd_, this);
    close(fd_);
    fd_ = -1;
    retry_at_ns_ = now_ns() + backoff_ns_;
    backoff_ns_ = std::min<int64_t>(backoff_ns_ * 2, 500'000'000);
    state_.store(State::kBackoff);
    return;
  }
  choose_congestion();
  state_.store(State::kHandshake);
  handshake_deadline_ns_ = connect_deadline_ns_;
  last_rx_ns_.store(now_ns());
  // The hello goes first, ahead of anything already queued.
  FrameHeader h;
  h.type = FrameType::kHello;
  txq_.push_front(text_item(h, transport_->hello_body(stream_, endpoint())));
  transport_->engine().modify(fd_, EPOLLIN, this);
  want_out_ = false;
  flush();
}

void Connection::mark_open(const FrameHeader* first) {
  std::lock_guard tx(tx_mu_);
  if (state_.load() == State::kClosed) return;
  if (first != nullptr) {
    auto item = std::make_unique<TxItem>();
    encode_header(*first, item->hdr);
    txq_.push_front(std::move(item));
  }
  // The full segment size this path settles at: the MSS advertised for it (TCP_MAXSEG at
  // this point is still bounded by half of the peer's small initial window: 32768 on
  // loopback, where the segments soon carry 65483 bytes).
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (fd_ >= 0 && getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_advmss > 0)
    mss_.store(ti.tcpi_advmss, std::memory_order_relaxed);
  state_.store(State::kOpen);
  flush();
}

void Connection::post(const FrameHeader& h, const void* payload, size_t len,
                      const std::shared_ptr<detail::RequestState>& part, std::shared_ptr<void> hold) {
  std::unique_lock tx(tx_mu_);
  if (state_.load() == State::kClosed) {
    tx.unlock();  // completing may run callbacks that post on this connection
    if (part) part->part_done(Status::PeerFailed("connection to {} is closed", remote_));
    return;
  }
  // Fast path: nothing queued ahead and no zero-copy wanted, so the frame goes out in one
  // sendmsg() from here, and is queued only for what the socket did not take. Saves the
  // queue item's allocation and the generic flush on every small message.
  const bool zc = zerocopy_ && len >= transport_->options().zerocopy_min;
  if (txq_.empty() && !zc && state_.load() == State::kOpen && fd_ >= 0) {
    std::byte hdr[kHeaderSize];
    encode_header(h, hdr);
    iovec iov[2] = {{hdr, kHeaderSize}, {const_cast<void*>(payload), len}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = len > 0 ? 2 : 1;
    ssize_t w;
    do {
      w = sys_sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (w < 0 && errno == EINTR);
    const int err = w < 0 ? errno : 0;
    const bool failed = w < 0 && err != EAGAIN && err != EWOULDBLOCK;
    const size_t sent = w > 0 ? static_cast<size_t>(w) : 0;
    if (!failed && sent == kHeaderSize + len) {
      last_tx_ns_.store(now_coarse_ns(), std::memory_order_relaxed);
      tx.unlock();  // completing may run callbacks that post on this connection
      if (part) part->part_done(Status::Ok());
      return;
    }
    // Queued for the rest, or, when the socket failed, for fail() to complete with the
    // error: it tells the endpoint first, so the request's error names the operation and
    // the peer (completing it here with the bare socket error lost both).
    auto item = std::make_unique<TxItem>();
    std::memcpy(item->hdr, hdr, kHeaderSize);
    item->payload = static_cast<const std::byte*>(payload);
    item->length = len;
    item->sent = sent;
    item->part = part;
    item->hold = std::move(hold);
    txq_.push_back(std::move(item));
    if (failed) {
      Status why = Status::PeerFailed("sendmsg to {}: {}", remote_, std::strerror(err));
      tx.unlock();
      fail(why);
      return;
    }
    last_tx_ns_.store(now_coarse_ns(), std::memory_order_relaxed);
    set_want_out(true);  // the socket is full: EPOLLOUT resumes the rest
    return;
  }
  auto item = std::make_unique<TxItem>();
  encode_header(h, item->hdr);
  item->payload = static_cast<const std::byte*>(payload);
  item->length = len;
  item->part = part;
  item->hold = std::move(hold);
  txq_.push_back(std::move(item));
  flush();
}

void Connection::post_text(FrameHeader h, std::string text) {
  std::lock_guard tx(tx_mu_);
  if (state_.load() == State::kClosed) return;
  txq_.push_back(text_item(h, std::move(text)));
  flush();
}

void Connection::post_deferred(const FrameHeader& h) {
  bool tell = false;
  {
    std::lock_guard tx(tx_mu_);
    if (state_.load() == State::kClosed) return;
    auto item = std::make_unique<TxItem>();
    encode_header(h, item->hdr);
    txq_.push_back(std::move(item));
    tell = !deferred_;
    deferred_ = true;
  }
  if (tell) transport_->defer(shared_from_this());
}

void Connection::flush_deferred() {
  std::lock_guard tx(tx_mu_);
  deferred_ = false;
  flush();
}

void Connection::set_want_out(bool want) {
  if (want == want_out_ || fd_ < 0) return;
  want_out_ = want;
  transport_->engine().modify(fd_, want ? (EPOLLIN | EPOLLOUT) : EPOLLIN, this);
}

void Connection::flush() {
  State st = state_.load();
  if (st == State::kClosed || st == State::kConnecting || st == State::kBackoff || fd_ < 0) return;
  // During the handshake only the hello (queued first, with owned storage) may go out; an
  // incoming connection sends nothing before mark_open() puts its hello-ack first.
  bool handshake = st == State::kHandshake;
  if (handshake && !outgoing_) return;
  SmallVector<std::shared_ptr<detail::RequestState>, 8> written;  // no allocation for a few frames
  Status failed;  // the socket's error: the frames written before it still complete
  while (!txq_.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    size_t items = 0;
    for (auto it = txq_.begin(); it != txq_.end() && n + 2 <= kMaxIov; ++it, ++items) {
      if (handshake && items > 0) break;
      TxItem& t = **it;
      if (t.sent < kHeaderSize) {
        iov[n++] = {t.hdr + t.sent, kHeaderSize - t.sent};
        if (t.length > 0) iov[n++] = {const_cast<std::byte*>(t.payload), t.length};
      } else {
        iov[n++] = {const_cast<std::byte*>(t.payload) + (t.sent - kHeaderSize), t.length - (t.sent - kHeaderSize)};
      }
    }
    if (n == 0) break;
    // Zero-copy pays for large payloads only: the completion bookkeeping costs more than
    // copying a small one.
    bool zc = false;
    if (zerocopy_ && !handshake) {
      size_t k = 0;
      for (auto it = txq_.begin(); k < items; ++it, ++k)
        if ((*it)->length >= transport_->options().zerocopy_min) zc = true;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = sys_sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | (zc ? MSG_ZEROCOPY : 0));
    if (w < 0 && zc && errno == ENOBUFS) {
      // Out of optmem for notifications: send this batch with a copy.
      zc = false;
      w = sys_sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_want_out(true);
        break;
      }
      if (errno == EINTR) continue;
      failed = Status::PeerFailed("sendmsg to {}: {}", remote_, std::strerror(errno));
      break;
    }
    uint32_t zc_id = zc ? zc_next_++ : 0;
    last_tx_ns_.store(now_coarse_ns(), std::memory_order_relaxed);
    size_t left = static_cast<size_t>(w);
    while (left > 0 && !txq_.empty()) {
      TxItem& t = *txq_.front();
      size_t total = kHeaderSize + t.length;
      size_t take = std::min(left, total - t.sent);
      t.sent += take;
      left -= take;
      if (zc) {
        t.zc = true;
        t.zc_id = zc_id;
      }
      if (t.sent == total) {
        if (t.zc) {
          zc_wait_.push_back(std::move(txq_.front()));  // the kernel may still read it
        } else if (t.part) {
          written.emplace_back(std::move(t.part));
        }
        txq_.pop_front();
      }
    }
    if (handshake) break;
  }
  if (txq_.empty() || handshake) set_want_out(false);
  if (!zc_wait_.empty()) reap_zerocopy();
  // Frames whose zero-copy sends are complete release their requests and pins.
  while (!zc_wait_.empty() && static_cast<int32_t>(zc_wait_.front()->zc_id - zc_done_) < 0) {
    if (zc_wait_.front()->part) written.emplace_back(std::move(zc_wait_.front()->part));
    zc_wait_.pop_front();
  }
  if (!written.empty()) {
    // Completing may run user callbacks that post on this connection: drop the lock first.
    tx_mu_.unlock();
    written.for_each([](std::shared_ptr<detail::RequestState>& r) { r->part_done(Status::Ok()); });
    tx_mu_.lock();
  }
  if (!failed.ok()) {
    tx_mu_.unlock();
    fail(failed);
    tx_mu_.lock();
  }
}

void Connection::set_rcvlowat(int bytes) {
  // Raised only after a short direct read, to at most what the frame still owes; lowered
  // with what the frame owes when a read through the buffer took less than the mark (one
  // that did not wait for epoll: a spinning waiter tries its last connection directly); and
  // back to 1 in finish_payload(), wherever the frame's last bytes arrived. A mark above
  // what can still arrive never wakes us: the first version reset it only on the direct
  // path, and two concurrent collective tests stalled; the second left it above the tail
  // after a spinning waiter's short read through the buffer, and the tail of a striped write
  // over a slow link waited for heartbeats (tests/transport/tcp_connection_test.cc).
  if (bytes == rcvlowat_) return;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes) == 0) rcvlowat_ = bytes;
}

void Connection::reap_zerocopy() {
  // Completions arrive on the socket's error queue as ranges [lo, hi] of send ids; TCP
  // completes them in order, so the highest hi covers everything before it.
  for (;;) {
    char control[128];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(fd_, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
            (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
        continue;
      auto* ee = reinterpret_cast<sock_extended_err*>(CMSG_DATA(cm));
      if (ee->ee_errno != 0 || ee->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
      uint32_t next = ee->ee_data + 1;  // hi + 1
      if (static_cast<int32_t>(next - zc_done_) > 0) zc_done_ = next;
    }
  }
}

void Connection::on_event(uint32_t events) {
  State st = state_.load();
  if (st == State::kClosed) return;
  if (st == State::kConnecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    std::lock_guard rx(rx_mu_);
    RxOwner own(this);
    std::lock_guard tx(tx_mu_);
    if (state_.load() == State::kConnecting) on_connected();
    return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    if (rx_mu_.try_lock()) {
      {
        RxOwner own(this);
        read_ready();
      }
      rx_mu_.unlock();
      if (state_.load() == State::kClosed) reap_rx();
    }
  }
  if (events & (EPOLLOUT | EPOLLERR)) {
    // EPOLLERR also reports zero-copy completions waiting on the error queue.
    if (tx_mu_.try_lock()) {
      flush();
      tx_mu_.unlock();
    }
  }
}

void Connection::while_reading(const std::function<void()>& f) {
  {
    std::lock_guard rx(rx_mu_);
    RxOwner own(this);
    f();
  }
  if (state_.load() == State::kClosed) reap_rx();
}

void Connection::read_ready() {
  // Parse everything already buffered; bound only the recv() calls per event so one busy
  // connection cannot starve the others (level-triggered epoll reports what is left).
  // Never return with a complete frame still in the buffer: nothing would report it.
  int recvs_left = kReadBudget;
  bool drained = false;  // the socket had nothing more at the last recv()
  for (;;) {
    if (state_.load() == State::kClosed) return;
    size_t buffered = rx_end_ - rx_begin_;
    if (in_payload_ && buffered > 0) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(buffered, payload_left_));
      if (sink_.kind == RxSink::Kind::kData) {
        std::memcpy(sink_.dst, rxbuf_.data() + rx_begin_, take);
        sink_.dst += take;
      } else if (sink_.kind == RxSink::Kind::kControl) {
        control_.append(reinterpret_cast<const char*>(rxbuf_.data() + rx_begin_), take);
      }
      rx_begin_ += take;
      payload_left_ -= take;
      if (payload_left_ == 0) {
        finish_payload();
      } else if (payload_left_ < static_cast<uint64_t>(rcvlowat_)) {
        // A read that did not wait for epoll (a spinning waiter's) took less than the mark:
        // what the frame still owes may never reach it.
        set_rcvlowat(static_cast<int>(payload_left_));
      }
      continue;
    }
    if (!in_payload_ && buffered >= kHeaderSize) {
      auto h = decode_header(rxbuf_.data() + rx_begin_);
      if (!h.ok()) {
        fail(h.status().with_context("frame from {}", remote_));
        return;
      }
      rx_begin_ += kHeaderSize;
      if (!handle_header(*h)) return;
      continue;
    }
    // Everything buffered is consumed; more bytes must come from the socket.
    if (drained || recvs_left-- <= 0) return;
    ssize_t r;
    if (in_payload_ && sink_.kind == RxSink::Kind::kData && payload_left_ >= kDirectMin) {
      r = sys_recv(fd_, sink_.dst, payload_left_, MSG_DONTWAIT);  // straight into the destination
      if (r > 0) {
        sink_.dst += r;
        payload_left_ -= static_cast<uint64_t>(r);
        if (payload_left_ == 0) {
          finish_payload();  // resets the low-water mark
        } else {
          drained = true;  // a short read: the socket is (momentarily) empty
          // Be woken again only when a good piece of the rest is there: fewer wake-ups
          // and larger copies per recv(). Safe because the sender writes a frame's payload
          // in one go: at least this much is on its way.
          set_rcvlowat(static_cast<int>(std::min<uint64_t>(payload_left_, kLowatMax)));
        }
      }
    } else {
      if (rx_begin_ > 0) {
        std::memmove(rxbuf_.data(), rxbuf_.data() + rx_begin_, rx_end_ - rx_begin_);
        rx_end_ -= rx_begin_;
        rx_begin_ = 0;
      }
      size_t room = rxbuf_.size() - rx_end_;
      r = sys_recv(fd_, rxbuf_.data() + rx_end_, room, MSG_DONTWAIT);
      if (r > 0) {
        rx_end_ += static_cast<size_t>(r);
        // A short read drained the socket: parse what we have, then stop instead of paying
        // for a recv() that returns EAGAIN.
        if (static_cast<size_t>(r) < room) drained = true;
      }
    }
    if (r > 0) {
      last_rx_ns_.store(now_coarse_ns(), std::memory_order_relaxed);
      continue;
    }
    if (r == 0) {
      bool mid = in_payload_ || rx_end_ > rx_begin_;
      fail(Status::PeerFailed("connection closed by {}{}", remote_,
                              mid ? fmt::format(" in the middle of a {} frame", frame_type_name(sink_.hdr.type)) : ""));
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR) continue;
    fail(Status::PeerFailed("recv from {}: {}", remote_, std::strerror(errno)));
    return;
  }
}

bool Connection::handle_header(const FrameHeader& h) {
  sink_ = RxSink{};
  sink_.hdr = h;
  control_.clear();
  State st = state_.load();
  if (st == State::kHandshake) {
    // Before the handshake completes only hello / hello-ack / error are legal.
    bool ok = outgoing_ ? (h.type == FrameType::kHelloAck || h.type == FrameType::kError)
                        : h.type == FrameType::kHello;
    if (!ok) {
      fail(Status::Protocol("{} sent a {} frame before the handshake", remote_, frame_type_name(h.type)));
      return false;
    }
  }
  switch (h.type) {
    case FrameType::kHello: case FrameType::kError:
      sink_.kind = RxSink::Kind::kControl;
      break;
    case FrameType::kHeartbeat:
      break;
    case FrameType::kBye: {
      // Closed first, then told: the endpoint counts the connections still open.
      TcpEndpoint* ep = endpoint();
      fail(Status::PeerFailed("{} closed the connection", remote_), /*notify=*/false);
      if (ep != nullptr) ep->on_bye(*this);
      return false;
    }
    case FrameType::kHelloAck:
      mark_open();
      if (TcpEndpoint* ep = endpoint()) ep->on_stream_open(*this);
      break;
    default: {
      TcpEndpoint* ep = endpoint();
      if (ep == nullptr) {
        fail(Status::Internal("{} frame on a connection without endpoint", frame_type_name(h.type)));
        return false;
      }
      ep->on_header(*this, sink_);
      break;
    }
  }
  in_payload_ = h.length > 0;
  payload_left_ = h.length;
  if (sink_.kind == RxSink::Kind::kNone && h.length > 0) sink_.kind = RxSink::Kind::kDiscard;
  if (!in_payload_) finish_payload();
  return state_.load() != State::kClosed;
}

void Connection::finish_payload() {
  in_payload_ = false;
  set_rcvlowat(1);  // the one place the mark comes down: the next frame's header may be tiny
  const FrameHeader& h = sink_.hdr;
  if (h.type == FrameType::kHello) {
    auto hello = decode_hello(control_);
    if (!hello.ok()) {
      fail(hello.status().with_context("hello from {}", remote_));
      return;
    }
    Status st = transport_->on_hello(shared_from_this(), *hello);
    if (!st.ok()) fail(st);
    return;
  }
  if (h.type == FrameType::kError) {
    fail(Status::PeerFailed("{} refused the connection: {}", remote_, control_));
    return;
  }
  if (h.type == FrameType::kHelloAck || h.type == FrameType::kHeartbeat) return;
  if (TcpEndpoint* ep = endpoint()) ep->on_payload(*this, sink_, control_);
  sink_ = RxSink{};
}

void Connection::tick(int64_t now) {
  State st = state_.load();
  if (st == State::kClosed) return;
  if (st == State::kBackoff || st == State::kConnecting || st == State::kHandshake) {
    int64_t deadline = outgoing_ ? connect_deadline_ns_ : handshake_deadline_ns_;
    if (now > deadline) {
      std::string why = last_connect_error_.ok() ? std::string("no handshake") : last_connect_error_.message();
      fail(Status::PeerFailed("could not connect to {} within the connect timeout ({})", remote_, why));
      return;
    }
  }
  if (st == State::kBackoff && now >= retry_at_ns_) {
    if (!rx_mu_.try_lock()) return;
    std::lock_guard tx(tx_mu_);
    std::lock_guard rx(rx_mu_, std::adopt_lock);
    RxOwner own(this);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port_);
    inet_pton(AF_INET, host_.c_str(), &sa.sin_addr);
    if (!open_socket().ok()) return;
    state_.store(State::kConnecting);
    int rc = connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno != EINPROGRESS) {
      last_connect_error_ = Status::Unavailable("connect: {}", std::strerror(errno));
      close(fd_);
      fd_ = -1;
      retry_at_ns_ = now + backoff_ns_;
      backoff_ns_ = std::min<int64_t>(backoff_ns_ * 2, 500'000'000);
      state_.store(State::kBackoff);
      return;
    }
    if (Status add = transport_->engine().add(fd_, EPOLLIN | EPOLLOUT, this); !add.ok()) {
      last_connect_error_ = add;
      close(fd_);
      fd_ = -1;
      state_.store(State::kBackoff);
    }
    return;
  }
  if (st != State::kOpen) return;
  const auto& o = transport_->options();
  if (now - last_rx_ns_.load(std::memory_order_relaxed) > o.peer_timeout_ms * 1'000'000ll) {
    fail(Status::PeerFailed("no data or heartbeat from {} for {} ms (process frozen, dead or unreachable)", remote_,
                            o.peer_timeout_ms));
    return;
  }
  if (now - last_tx_ns_.load(std::memory_order_relaxed) > o.heartbeat_ms * 1'000'000ll) {
    if (!tx_mu_.try_lock()) return;
    if (txq_.empty()) {
      auto item = std::make_unique<TxItem>();
      FrameHeader h;
      h.type = FrameType::kHeartbeat;
      encode_header(h, item->hdr);
      txq_.push_back(std::move(item));
      flush();
    }
    last_tx_ns_.store(now, std::memory_order_relaxed);  // a stuck queue is the peer's silence, seen above
    tx_mu_.unlock();
  }
}

void Connection::fail(const Status& why, bool notify) {
  State prev = state_.exchange(State::kClosed);
  if (prev == State::kClosed) return;
  if (fd_ >= 0) {
    transport_->engine().remove(fd_, this);
    {
      // A zero-copy frame the kernel has not sent yet is read from the user's pages when it
      // goes, and its request fails below: the user may write there at once, and a shutdown
      // still sends the queue. Resetting the connection drops what is unsent.
      std::lock_guard tx(tx_mu_);
      if (holds_user_pages()) abort_socket();
    }
    // The fd is closed by the destructor: another thread may still be inside on_event.
    shutdown(fd_, SHUT_RDWR);
  }
  PODNET_DEBUG(kNet, "connection {} (stream {}, {}) closed: {}", remote_, stream_, outgoing_ ? "out" : "in",
               why.to_string());
  if (notify) {
    if (TcpEndpoint* ep = endpoint()) ep->on_connection_failed(*this, why);
    else if (prev == State::kHandshake && !outgoing_)
      PODNET_WARN(kNet, "closed incoming connection from {}: {}", remote_, why.message());
  }
  // Frames that will never be sent: their requests fail with the connection's error.
  std::deque<std::unique_ptr<TxItem>> dropped;
  {
    std::lock_guard tx(tx_mu_);
    dropped.swap(txq_);
    for (auto& t : zc_wait_) dropped.push_back(std::move(t));
    zc_wait_.clear();
  }
  for (auto& t : dropped)
    if (t->part) t->part->part_done(why);
  reap_rx();
  transport_->retire(shared_from_this());
}

bool Connection::holds_user_pages() {
  if (!zc_wait_.empty()) reap_zerocopy();
  for (const auto& t : zc_wait_)
    if (static_cast<int32_t>(t->zc_id - zc_done_) >= 0) return true;
  return !txq_.empty() && txq_.front()->zc;  // partly sent
}

void Connection::abort_socket() {
  // connect(AF_UNSPEC) disconnects a TCP socket (tcp_disconnect): its send queue is dropped
  // and the peer gets a reset; the descriptor stays valid for threads still inside on_event.
  sockaddr sa{};
  sa.sa_family = AF_UNSPEC;
  if (connect(fd_, &sa, sizeof sa) != 0)
    PODNET_WARN(kNet, "could not reset the connection to {} with zero-copy frames unsent: {}", remote_,
                std::strerror(errno));
  else
    PODNET_DEBUG(kNet, "reset the connection to {}: zero-copy frames were unsent", remote_);
}

bool Connection::zerocopy_pending() {
  std::lock_guard tx(tx_mu_);
  if (!holds_user_pages()) return false;
  if (state_.load() != State::kClosed) flush();  // sends what it can, reaps completions
  return holds_user_pages();
}

void Connection::reap_rx() {
  if (t_rx_owner == this || !rx_mu_.try_lock()) return;
  {
    RxOwner own(this);
    abort_sink();
  }
  rx_mu_.unlock();
}

void Connection::abort_sink() {
  in_payload_ = false;
  payload_left_ = 0;
  RxSink sink = std::move(sink_);
  sink_ = RxSink{};
  if (TcpEndpoint* ep = endpoint()) {
    ep->abort_payload(sink);
  } else if (sink.req) {
    sink.req->complete(Status::PeerFailed("connection to {} closed with a message half received", remote_));
  }
}  // releases a region pin, an unexpected message's reference

}  // namespace podnet::tcp
