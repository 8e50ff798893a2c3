// One TCP connection's receive side driven by hand: a raw socket plays the peer, frame by
// frame and byte by byte, and the test decides which reads happen (an engine without its
// background thread, polled here; a spinning waiter's read past epoll called directly).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/request.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/transport.h"
#include "transport/tcp/wire.h"

namespace podnet::tcp {
namespace {

// A listening socket on a free loopback port (`flags` for socket(), e.g. SOCK_NONBLOCK);
// `sa` gets its address.
int loopback_listener(int flags, int backlog, sockaddr_in& sa) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  sa = sockaddr_in{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  EXPECT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  EXPECT_EQ(listen(lfd, backlog), 0);
  EXPECT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  return lfd;
}

// A connected loopback TCP pair: {the test's peer socket, the socket the connection adopts};
// `peer_rcvbuf` bytes of receive buffer on the peer's (0: the default).
std::pair<int, int> tcp_pair(int peer_rcvbuf = 0) {
  sockaddr_in sa;
  int lfd = loopback_listener(0, 1, sa);
  int peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (peer_rcvbuf > 0) setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &peer_rcvbuf, sizeof peer_rcvbuf);
  EXPECT_EQ(connect(peer, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  int one = 1;
  setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int mine = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  EXPECT_GE(mine, 0) << std::strerror(errno);
  close(lfd);
  return {peer, mine};
}

void send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    ASSERT_GT(w, 0) << std::strerror(errno);
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void send_frame(int fd, const FrameHeader& h, const void* payload, size_t n) {
  std::byte hdr[kHeaderSize];
  encode_header(h, hdr);
  std::vector<std::byte> out(hdr, hdr + kHeaderSize);
  out.insert(out.end(), static_cast<const std::byte*>(payload), static_cast<const std::byte*>(payload) + n);
  send_all(fd, out.data(), out.size());
}

// The next frame header from the connection, polling the engine meanwhile (it sends from
// the thread that handles the input); nullopt when none came within `limit`.
std::optional<FrameHeader> next_frame(detail::ProgressEngine& engine, int peer, std::chrono::milliseconds limit) {
  std::byte buf[kHeaderSize];
  size_t got = 0;
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    engine.poll(10);
    ssize_t r = recv(peer, buf + got, kHeaderSize - got, MSG_DONTWAIT);
    if (r > 0) got += static_cast<size_t>(r);
    if (got == kHeaderSize) {
      auto h = decode_header(buf);
      EXPECT_TRUE(h.ok()) << h.status().to_string();
      if (!h.ok()) return std::nullopt;
      return *h;
    }
  }
  return std::nullopt;
}

int rcvlowat(int fd) {
  int v = -1;
  socklen_t len = sizeof v;
  getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &len);
  return v;
}

// Polls the engine until the byte at `off` of `mem` is non-zero (up to a second).
bool arrived(detail::ProgressEngine& engine, const std::vector<unsigned char>& mem, size_t off) {
  for (int i = 0; i < 100 && mem[off] == 0; ++i) engine.poll(10);
  return mem[off] != 0;
}

class TcpConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = detail::ProgressEngine::create({});  // not started: only this thread polls
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine_ = std::move(e).value();
    registry_ = std::make_shared<detail::MemoryRegistry>(1);
    auto t = TcpTransport::create(*engine_, *registry_, /*ctx_id=*/1, /*rank=*/0, "127.0.0.1", 0, options());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    transport_ = std::move(t).value();
    auto [peer, conn] = open_stream(0);
    peer_ = peer;
    conn_ = conn;
  }

  // A connection of the peer's (rank 1, two streams), adopted and through its handshake:
  // {the peer's socket, the connection}.
  virtual TcpOptions options() const { return {}; }
  virtual int peer_rcvbuf() const { return 0; }

  std::pair<int, std::shared_ptr<Connection>> open_stream(int stream) {
    auto [peer, mine] = tcp_pair(peer_rcvbuf());
    if (stream == 0) fd_ = mine;
    auto conn = std::make_shared<Connection>(transport_.get(), /*outgoing=*/false, -1);
    EXPECT_TRUE(conn->adopt(mine, "test peer").ok());
    transport_->track(conn);
    HelloBody hello;
    hello.ctx_id = 2;
    hello.rank = 1;
    hello.stream = static_cast<uint16_t>(stream);
    hello.nstreams = 2;
    hello.listen = "127.0.0.1:9";
    std::string body = encode_hello(hello);
    FrameHeader h;
    h.type = FrameType::kHello;
    h.length = body.size();
    h.a = 2;
    h.b = 1;
    send_frame(peer, h, body.data(), body.size());
    auto ack = next_frame(*engine_, peer, std::chrono::seconds(5));
    EXPECT_TRUE(ack.has_value()) << "no hello-ack on stream " << stream;
    if (ack) {
      EXPECT_EQ(ack->type, FrameType::kHelloAck);
    }
    return {peer, conn};
  }
  // Fails the endpoint from another thread while this one holds the stream's receive lock as
  // a thread in the middle of `r`'s payload does: `r` must not complete before the reader lets
  // go of it, and then fails with the endpoint's error.
  void fail_while_reading(TcpEndpoint* ep, const std::shared_ptr<detail::RequestState>& r, const char* what) {
    conn_->while_reading([&] {
      std::thread([ep] { ep->fail(Status::PeerFailed("test: another stream failed")); }).join();
      EXPECT_FALSE(r->done()) << "the " << what << " was failed while a thread still read into its buffer";
    });
    ASSERT_TRUE(r->done()) << "the " << what << " still waits after its reader let go";
    EXPECT_EQ(r->status().code(), Code::kPeerFailed) << r->status().to_string();
    EXPECT_NE(r->status().message().find("another stream failed"), std::string::npos) << r->status().message();
  }

  // Whether `region` deregisters within 2 s. Deregistration waits for the region's pins: in
  // a thread, so that a pin left behind fails the test instead of hanging it.
  bool deregisters(const std::shared_ptr<detail::RegionState>& region) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> removed = done->get_future();
    std::thread([reg = registry_, region, done] {
      reg->remove(*region);
      done->set_value();
    }).detach();
    return removed.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  }

  void TearDown() override {
    if (transport_) transport_->shutdown();
    conn_.reset();
    transport_.reset();
    if (peer_ >= 0) close(peer_);
  }

  std::unique_ptr<detail::ProgressEngine> engine_;
  std::shared_ptr<detail::MemoryRegistry> registry_;
  std::unique_ptr<TcpTransport> transport_;
  std::shared_ptr<Connection> conn_;
  int peer_ = -1, fd_ = -1;
};

// A payload arriving in pieces raises SO_RCVLOWAT to what the frame still owes, so that a
// poll wakes for a good piece of it. A read that does not wait for epoll (a spinning waiter
// tries the connection its last input came on) may take less than the mark: the mark must
// come down with it, or the frame's last bytes, fewer than the stale mark, never wake
// anyone. That stalled a striped write over a slow link until enough heartbeats arrived.
TEST_F(TcpConnection, AReadBelowTheLowWaterMarkLowersIt) {
  constexpr size_t kLen = 20000;
  std::vector<unsigned char> dst(kLen, 0);
  auto region = registry_->add(dst.data(), dst.size(), Access::kRemoteWrite);
  ASSERT_TRUE(region.ok()) << region.status().to_string();
  std::vector<unsigned char> src(kLen);
  for (size_t i = 0; i < kLen; ++i) src[i] = static_cast<unsigned char>(1 + i % 251);

  FrameHeader w;
  w.type = FrameType::kWrite;
  w.a = (*region)->key;
  w.b = reinterpret_cast<uint64_t>(dst.data());
  w.length = kLen;
  w.seq = 41;
  // The header and 3000 bytes: through the receive buffer.
  send_frame(peer_, w, src.data(), 3000);
  ASSERT_TRUE(arrived(*engine_, dst, 2999));
  // 11000 more: read straight into the destination, short of the frame, so the mark goes
  // up to the 6000 bytes still owed.
  send_all(peer_, src.data() + 3000, 11000);
  ASSERT_TRUE(arrived(*engine_, dst, 13999));
  ASSERT_EQ(rcvlowat(fd_), 6000) << "the direct read should raise the mark to what the frame owes";
  // 1000 bytes, fewer than the mark: epoll does not report them, a spinning waiter reads them.
  send_all(peer_, src.data() + 14000, 1000);
  engine_->poll(50);
  EXPECT_EQ(dst[14999], 0) << "epoll reported fewer bytes than SO_RCVLOWAT";
  conn_->on_event(EPOLLIN);
  ASSERT_NE(dst[14999], 0) << "the direct on_event() read nothing";
  EXPECT_LE(rcvlowat(fd_), 5000) << "the mark stays above the 5000 bytes the frame still owes";
  // The last 5000 bytes must wake the engine: the acknowledgement comes.
  send_all(peer_, src.data() + 15000, 5000);
  auto ack = next_frame(*engine_, peer_, std::chrono::seconds(2));
  ASSERT_TRUE(ack.has_value()) << "no acknowledgement 2 s after the write's last byte (SO_RCVLOWAT " << rcvlowat(fd_)
                               << ")";
  EXPECT_EQ(ack->type, FrameType::kWriteAck);
  EXPECT_EQ(ack->seq, 41u);
  EXPECT_EQ(ack->status, 0u);
  EXPECT_EQ(rcvlowat(fd_), 1) << "back to 1 once the frame is complete";
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), kLen), 0);
  registry_->remove(**region);
}

// A message arriving into a posted receive is held by its connection alone (the matcher
// handed the receive over): when the connection closes halfway, by the peer's EOF seen by the
// reading thread or failed from elsewhere (another stream, the peer timeout), that receive
// must fail with the peer's error at once, not wait forever.
class TcpConnectionClosing : public TcpConnection, public ::testing::WithParamInterface<bool> {};

TEST_P(TcpConnectionClosing, AReceiveFillingFromAMessageFailsWhenTheConnectionCloses) {
  const bool eof = GetParam();
  TcpEndpoint* ep = conn_->endpoint();
  ASSERT_NE(ep, nullptr);
  std::vector<unsigned char> buf(4096, 0);
  auto r = ep->recv(buf.data(), buf.size(), 7, ~0ull);
  FrameHeader h;
  h.type = FrameType::kSend;
  h.a = 7;
  h.length = 1000;
  std::vector<unsigned char> part(100, 1);
  send_frame(peer_, h, part.data(), part.size());
  ASSERT_TRUE(arrived(*engine_, buf, 99));
  ASSERT_FALSE(r->done());
  if (eof) {
    close(peer_);  // the reader sees it and closes the connection itself
    peer_ = -1;
  } else {
    conn_->fail(Status::PeerFailed("test: another stream failed"));  // not the reader
  }
  for (int i = 0; i < 100 && !r->done(); ++i) engine_->poll(10);
  ASSERT_TRUE(r->done()) << "the receive still waits a second after its connection closed";
  EXPECT_EQ(r->status().code(), Code::kPeerFailed) << r->status().to_string();
  EXPECT_NE(r->status().message().find("recv"), std::string::npos) << r->status().message();
  EXPECT_FALSE(ep->health().ok());
}

// A one-sided write arriving when the connection closes: its region is free to deregister at
// once (the half-written frame's pin goes with the connection's receive state), instead of
// when the closed connection is finally freed (seconds later, or never without housekeeping).
TEST_P(TcpConnectionClosing, AHalfArrivedWriteDoesNotHoldItsRegion) {
  const bool eof = GetParam();
  std::vector<unsigned char> dst(20000, 0);
  auto region = registry_->add(dst.data(), dst.size(), Access::kRemoteWrite);
  ASSERT_TRUE(region.ok()) << region.status().to_string();
  std::vector<unsigned char> src(dst.size(), 3);
  FrameHeader w;
  w.type = FrameType::kWrite;
  w.a = (*region)->key;
  w.b = reinterpret_cast<uint64_t>(dst.data());
  w.length = dst.size();
  w.seq = 9;
  send_frame(peer_, w, src.data(), 3000);
  ASSERT_TRUE(arrived(*engine_, dst, 2999));
  if (eof) {
    close(peer_);
    peer_ = -1;
  } else {
    conn_->fail(Status::PeerFailed("test: another stream failed"));
  }
  for (int i = 0; i < 20; ++i) engine_->poll(10);
  EXPECT_TRUE(deregisters(*region)) << "deregistration still waits for the closed connection's half-written frame";
}

// The peer says bye on each of its connections after everything it sent there; one bye
// read before the frames still unread on another connection must not fail the endpoint
// (those frames would be lost: its messages travel on one connection, its goodbye on all).
TEST_F(TcpConnection, OneByeDoesNotFailTheEndpointWhileAnotherConnectionIsOpen) {
  auto [peer1, conn1] = open_stream(1);
  TcpEndpoint* ep = conn_->endpoint();
  ASSERT_NE(ep, nullptr);
  uint64_t v = 0;
  auto r = ep->recv(&v, sizeof v, 7, ~0ull);
  FrameHeader bye;
  bye.type = FrameType::kBye;
  send_frame(peer1, bye, nullptr, 0);
  for (int i = 0; i < 100 && conn1->state() != Connection::State::kClosed; ++i) engine_->poll(10);
  ASSERT_EQ(conn1->state(), Connection::State::kClosed) << "the bye on stream 1 was not read";
  EXPECT_TRUE(ep->health().ok()) << ep->health().to_string();
  // The message the peer sent on stream 0 before its bye there.
  FrameHeader m;
  m.type = FrameType::kSend;
  m.a = 7;
  m.length = sizeof v;
  const uint64_t sent = 0xfeedull;
  send_frame(peer_, m, &sent, sizeof sent);
  send_frame(peer_, bye, nullptr, 0);
  for (int i = 0; i < 100 && (!r->done() || ep->health().ok()); ++i) engine_->poll(10);
  ASSERT_TRUE(r->done());
  EXPECT_TRUE(r->status().ok()) << r->status().to_string();
  EXPECT_EQ(v, sent);
  Status h = ep->health();
  EXPECT_EQ(h.code(), Code::kPeerFailed) << "every connection said bye: " << h.to_string();
  EXPECT_NE(h.message().find("shut down"), std::string::npos) << h.message();
  close(peer1);
}

// The endpoint fails (another stream, the peer timeout) while a thread is reading a payload
// into the buffer of a rendezvous receive or a read: the operation must not be handed back
// failed while that thread may still write into its buffer (the user would free or reuse it
// under the copy). It fails once the reader lets go of the payload.
TEST_F(TcpConnection, ARendezvousReceiveIsNotFailedWhileAReaderCopiesIntoIt) {
  TcpEndpoint* ep = conn_->endpoint();
  ASSERT_NE(ep, nullptr);
  constexpr size_t kLen = 20000;
  std::vector<unsigned char> buf(kLen, 0);
  auto r = ep->recv(buf.data(), buf.size(), 5, ~0ull);
  FrameHeader rts;
  rts.type = FrameType::kRts;
  rts.a = 5;     // tag
  rts.b = 77;    // the sender's rendezvous id
  rts.c = kLen;  // message length
  send_frame(peer_, rts, nullptr, 0);
  auto cts = next_frame(*engine_, peer_, std::chrono::seconds(2));
  ASSERT_TRUE(cts.has_value()) << "no clear-to-send for the rendezvous";
  ASSERT_EQ(cts->type, FrameType::kCts);
  ASSERT_EQ(cts->a, 77u);
  FrameHeader d;
  d.type = FrameType::kRdvData;
  d.a = cts->b;  // the receiver's token
  d.b = 0;
  d.length = kLen;
  std::vector<unsigned char> part(3000, 1);
  send_frame(peer_, d, part.data(), part.size());
  ASSERT_TRUE(arrived(*engine_, buf, 2999));
  fail_while_reading(ep, r, "receive");
}

TEST_F(TcpConnection, AReadIsNotFailedWhileAReaderCopiesItsResponse) {
  TcpEndpoint* ep = conn_->endpoint();
  ASSERT_NE(ep, nullptr);
  // The endpoint's own streams, to a listener of the test's that answers their hellos.
  sockaddr_in sa;
  int lfd = loopback_listener(SOCK_NONBLOCK, 16, sa);
  ASSERT_TRUE(ep->start_outgoing({{"127.0.0.1", ntohs(sa.sin_port)}}).ok());
  std::vector<int> socks;
  const size_t want = ep->stream_count();
  for (int i = 0; i < 500 && socks.size() < want; ++i) {
    engine_->poll(10);
    int s = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s >= 0) socks.push_back(s);
  }
  close(lfd);
  ASSERT_EQ(socks.size(), want) << "the endpoint's streams did not connect";
  for (int s : socks) {
    auto hello = next_frame(*engine_, s, std::chrono::seconds(2));
    ASSERT_TRUE(hello.has_value() && hello->type == FrameType::kHello) << "no hello";
    std::string body(hello->length, '\0');
    ASSERT_EQ(recv(s, body.data(), body.size(), MSG_WAITALL), static_cast<ssize_t>(body.size()));
    FrameHeader ack;
    ack.type = FrameType::kHelloAck;
    ack.a = 2;
    ack.b = 1;
    send_frame(s, ack, nullptr, 0);
  }
  for (int i = 0; i < 20; ++i) engine_->poll(10);

  constexpr size_t kLen = 20000;
  std::vector<unsigned char> dst(kLen, 0);
  auto region = registry_->add(dst.data(), dst.size(), Access::kRemoteWrite);
  ASSERT_TRUE(region.ok()) << region.status().to_string();
  RemoteKey remote;
  remote.addr = 0x10000;
  remote.length = kLen;
  remote.key = 1234;
  auto r = ep->read(**region, 0, remote, 0, kLen);
  // The request, on whichever stream it took.
  std::optional<FrameHeader> req;
  for (int i = 0; i < 200 && !req; ++i) {
    for (int s : socks) {
      if (auto h = next_frame(*engine_, s, std::chrono::milliseconds(5))) {
        req = h;
        break;
      }
    }
  }
  ASSERT_TRUE(req.has_value()) << "no read request";
  ASSERT_EQ(req->type, FrameType::kReadReq);
  ASSERT_EQ(req->c, kLen) << "one chunk expected";
  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.seq = req->seq;
  resp.length = kLen;
  // The response comes back on the peer's stream 0 (any connection may carry it), so that
  // the connection reading it is the one this test holds.
  std::vector<unsigned char> part(3000, 1);
  send_frame(peer_, resp, part.data(), part.size());
  ASSERT_TRUE(arrived(*engine_, dst, 2999));
  fail_while_reading(ep, r, "read");
  for (int s : socks) close(s);
  registry_->remove(**region);
}

// A frame posted on a closed connection fails its request at once, and without the
// connection's send lock held: completing runs callbacks, and one that posts on the same
// connection (a striped write_notify's data, failing, sends its order-only frame on the
// ordered stream) must not find the lock taken by its own thread.
TEST_F(TcpConnection, AFrameThatCannotGoFailsItsRequestWithoutTheSendLock) {
  conn_->fail(Status::PeerFailed("test: another stream failed"));
  auto part = detail::make_request(engine_.get(), "write_notify data", 1);
  std::shared_ptr<Connection> c = conn_;
  part->on_complete([c](const Status&) {
    FrameHeader again;
    again.type = FrameType::kWriteImm;
    c->post(again, nullptr, 0);  // as post_order_only does
  });
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> posted = done->get_future();
  std::thread([c, part, done] {
    FrameHeader h;
    h.type = FrameType::kWrite;
    c->post(h, nullptr, 0, part);
    done->set_value();
  }).detach();
  ASSERT_EQ(posted.wait_for(std::chrono::seconds(2)), std::future_status::ready)
      << "the post is still inside: its request's callback waits for the send lock its own thread holds";
  EXPECT_TRUE(part->done());
  EXPECT_EQ(part->status().code(), Code::kPeerFailed) << part->status().to_string();
}

// Zero-copy sends leave the payload in the user's pages until the kernel has sent it: a
// connection that fails with such a frame still unsent (a peer that reads slowly) must not
// hand the memory back while the kernel may still send from it, or the peer receives what the
// user wrote there afterwards as the frame's bytes.
class TcpConnectionZerocopy : public TcpConnection {
 protected:
  TcpOptions options() const override {
    TcpOptions o;
    o.zerocopy = TcpOptions::Zerocopy::kOn;
    return o;
  }
  int peer_rcvbuf() const override { return 64 << 10; }
};

TEST_F(TcpConnectionZerocopy, AFailedConnectionSendsNothingFromMemoryItGaveBack) {
  constexpr size_t kLen = 8 << 20;
  constexpr unsigned char kOld = 0x11, kNew = 0xee;
  std::vector<unsigned char> mem(kLen, kOld);
  auto region = registry_->add(mem.data(), mem.size(), Access::kRemoteRead);
  ASSERT_TRUE(region.ok()) << region.status().to_string();
  FrameHeader rq;
  rq.type = FrameType::kReadReq;
  rq.seq = 5;
  rq.a = (*region)->key;
  rq.b = reinterpret_cast<uint64_t>(mem.data());
  rq.c = kLen;
  send_frame(peer_, rq, nullptr, 0);
  // The response goes out as far as the peer's window lets it (the peer reads nothing yet).
  for (int i = 0; i < 20; ++i) engine_->poll(10);
  TcpEndpoint* ep = conn_->endpoint();
  ASSERT_NE(ep, nullptr);
  ep->fail(Status::PeerFailed("test: another stream failed"));
  // The region deregisters, and the user writes new bytes into the memory.
  ASSERT_TRUE(deregisters(*region)) << "deregistration still waits for the failed connection";
  std::memset(mem.data(), kNew, mem.size());
  // Everything the peer still receives: the response's header, then its payload.
  std::vector<unsigned char> got;
  std::vector<unsigned char> chunk(1 << 16);
  for (;;) {
    pollfd p{peer_, POLLIN, 0};
    if (poll(&p, 1, 1000) != 1) break;
    ssize_t r = recv(peer_, chunk.data(), chunk.size(), 0);
    if (r <= 0) break;  // end of file, or the connection was reset
    got.insert(got.end(), chunk.data(), chunk.data() + r);
  }
  ASSERT_GE(got.size(), kHeaderSize) << "the response never started";
  size_t changed = 0;
  for (size_t i = kHeaderSize; i < got.size(); ++i) changed += got[i] != kOld;
  EXPECT_EQ(changed, 0u) << "of " << got.size() - kHeaderSize
                         << " payload bytes the peer received after the failure, these carry what the user wrote "
                            "into the memory after it was handed back";
}

INSTANTIATE_TEST_SUITE_P(ByEofOrFromElsewhere, TcpConnectionClosing, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "PeerEof" : "FailedElsewhere";
                         });

}  // namespace
}  // namespace podnet::tcp
