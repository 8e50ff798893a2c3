#include "transport/tcp/endpoint.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "transport/tcp/transport.h"

namespace podnet::tcp {

using detail::RequestState;

namespace {
// Moves the entries of `from` that `held` does not keep into `to`.
template <typename Map, typename Held>
void take_unless(Map& from, Map& to, Held held) {
  for (auto it = from.begin(); it != from.end();) {
    if (held(it->second)) {
      ++it;
    } else {
      to.insert(from.extract(it++));
    }
  }
}
}  // namespace

TcpEndpoint::TcpEndpoint(TcpTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_listen)
    : transport_(transport), peer_id_(peer_id), peer_rank_(peer_rank), peer_listen_(std::move(peer_listen)) {}

TcpEndpoint::~TcpEndpoint() = default;

std::string TcpEndpoint::peer_name() const { return fmt::format("rank {} ({})", peer_rank_.load(), peer_listen_); }

Status TcpEndpoint::start_outgoing(const std::vector<std::pair<std::string, uint16_t>>& rails) {
  const auto& o = transport_->options();
  int64_t deadline = now_ns() + o.connect_timeout_ms * 1'000'000ll;
  const size_t nrails = std::max<size_t>(rails.size(), 1);
  // `streams` per rail, but a whole number per rail within the hello's limit of kMaxStreams.
  const size_t nstreams = std::min(static_cast<size_t>(o.streams), kMaxStreams / nrails) * nrails;
  std::vector<std::shared_ptr<Connection>> conns;
  for (size_t i = 0; i < nstreams; ++i) {
    auto c = std::make_shared<Connection>(transport_, /*outgoing=*/true, i);
    c->set_endpoint(this);
    // Before out_ publishes it: the housekeeping thread's tick() reads the deadline (a
    // connection is kConnecting from its construction on).
    const auto& [host, port] = rails[i % nrails];
    c->set_target(host, port, deadline);
    conns.push_back(c);
  }
  {
    std::lock_guard lk(conn_mu_);
    if (!out_.empty()) return {};
    out_ = conns;
  }
  for (auto& c : conns) {
    transport_->track(c);
    Status st = c->start_connect();
    if (!st.ok()) {
      fail(st.with_context("connect to {}", peer_name()));
      return st;
    }
  }
  PODNET_INFO(kNet, "connecting to {} with {} streams over {} rail{}", peer_name(), nstreams, nrails,
              nrails == 1 ? "" : "s");
  return {};
}

bool TcpEndpoint::has_outgoing() const {
  std::lock_guard lk(conn_mu_);
  return !out_.empty();
}

size_t TcpEndpoint::stream_count() const {
  std::lock_guard lk(conn_mu_);
  return out_.empty() ? static_cast<size_t>(transport_->options().streams) : out_.size();
}

Status TcpEndpoint::attach_incoming(const std::shared_ptr<Connection>& c, const HelloBody& hello) {
  std::lock_guard lk(conn_mu_);
  if (in_.size() < hello.nstreams) in_.resize(hello.nstreams);
  if (in_[hello.stream] && in_[hello.stream]->state() != Connection::State::kClosed)
    return Status::Protocol("{} opened stream {} twice", peer_name(), hello.stream);
  in_[hello.stream] = c;
  c->set_stream(hello.stream);
  c->set_endpoint(this);
  // The peer opened the stream both sides prefer for ordered frames (see ordered_stream()):
  // take it unless something was sent already. Frames posted now queue behind the hello-ack.
  if (hello.stream == 0 && transport_->ctx_id() > peer_id_ && ordered_.load(std::memory_order_relaxed) == nullptr)
    set_ordered(c);
  return {};
}

void TcpEndpoint::set_ordered(std::shared_ptr<Connection> c) {
  ordered_hold_ = std::move(c);
  ordered_.store(ordered_hold_.get(), std::memory_order_release);
  PODNET_DEBUG(kNet, "messages to {} go on {} stream 0 ({})", peer_name(), ordered_hold_->outgoing() ? "our" : "its",
               ordered_hold_->remote());
}

std::shared_ptr<Connection> TcpEndpoint::out_stream(size_t i) {
  std::lock_guard lk(conn_mu_);
  if (out_.empty()) return nullptr;
  return out_[i % out_.size()];
}

Connection* TcpEndpoint::ordered_stream() {
  if (Connection* c = ordered_.load(std::memory_order_acquire)) return c;
  std::lock_guard lk(conn_mu_);
  if (Connection* c = ordered_.load(std::memory_order_relaxed)) return c;
  // Nothing from the peer yet (or ours is the smaller id): our own stream 0, for good.
  std::shared_ptr<Connection> pick = !out_.empty() ? out_[0] : !in_.empty() ? in_[0] : nullptr;
  if (!pick) return nullptr;
  set_ordered(std::move(pick));
  return ordered_hold_.get();
}

Status TcpEndpoint::wait_connected(int64_t deadline_ns) {
  // The background thread drives the handshakes; this only watches.
  for (;;) {
    PODNET_RETURN_IF_ERROR(health());
    size_t open = 0, total = 0;
    {
      std::lock_guard lk(conn_mu_);
      total = out_.size();
      for (auto& c : out_) open += c->state() == Connection::State::kOpen;
    }
    if (open == total) return {};
    if (now_ns() >= deadline_ns)
      return Status::Timeout("connect to {}: {} of {} streams open at the deadline", peer_name(), open, total);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status TcpEndpoint::health() const {
  if (!has_failed_.load(std::memory_order_acquire)) return {};  // every post asks: no lock while healthy
  std::lock_guard lk(mu_);
  return failed_;
}

std::shared_ptr<RequestState> TcpEndpoint::new_request(const char* op) {
  return detail::make_request(&transport_->engine(), op, next_seq_.fetch_add(1, std::memory_order_relaxed));
}

// Runs `add` (which records an operation in the maps) under the lock unless the endpoint
// has failed: then nothing is recorded and the sticky error comes back, so no operation is
// recorded after fail() swept the maps.
template <typename F>
Status TcpEndpoint::register_unless_failed(F&& add) {
  std::lock_guard lk(mu_);
  if (!failed_.ok()) return failed_;
  add();
  return {};
}

Status TcpEndpoint::op_failure(const RequestState& r, const Status& why) const {
  return Status(why.code(), fmt::format("{} seq {} with {}: {}", r.op(), r.seq(), peer_name(), why.message()));
}

TcpEndpoint::Req TcpEndpoint::failed_request(const char* op, const Status& why) {
  auto r = new_request(op);
  r->complete(op_failure(*r, why));
  return r;
}

TcpEndpoint::ChunkPlan TcpEndpoint::chunk_plan(size_t len, bool fit_segments) const {
  if (len == 0) return {1, 1};
  const size_t cs = chunk_size(len, fit_segments, mss_.load(std::memory_order_relaxed));
  return {(len + cs - 1) / cs, cs};
}

size_t TcpEndpoint::chunk_size(size_t len, bool fit_segments, uint32_t mss) const {
  const auto& o = transport_->options();
  if (len < o.stripe_min) return o.chunk_mss && fit_segments ? single_segment_chunks(len, mss) : len;
  // Big enough to keep per-frame overhead small, small enough that every stream gets work.
  const size_t streams = stream_count();
  size_t per_stream = (len + streams - 1) / streams;
  size_t cs = std::max<size_t>(std::min<size_t>(o.chunk, per_stream), 64 * 1024);
  // Whole segments per frame: a frame that ends a few bytes into a segment makes the kernel
  // send that tail as a tiny segment of its own, one per chunk, and on loopback those cost
  // a fifth to a third of the bandwidth (receive-window collapses: TcpExtTCPToZeroWindowAdv;
  // docs/performance.md). 512 KiB chunks on loopback (MSS 65483): 8 segments of 65483
  // instead of 8 and one of 488 bytes.
  return o.chunk_mss ? whole_segments(cs, mss) : cs;
}

void TcpEndpoint::post_write_chunks(const std::shared_ptr<RequestState>& target, const std::byte* src,
                                    const RemoteKey& remote, uint64_t raddr, size_t len) {
  const ChunkPlan plan = chunk_plan(len, true);  // not a structured binding: the lambda below captures it
  const size_t n = plan.n, cs = plan.size;
  // Each chunk completes twice: acknowledged by the target, and released by the local
  // socket (with MSG_ZEROCOPY the kernel may read the buffer until then).
  target->set_parts(static_cast<int>(2 * n));
  uint64_t first = next_id_.fetch_add(n, std::memory_order_relaxed);
  if (Status why = register_unless_failed([&] {
        for (size_t i = 0; i < n; ++i) chunks_[first + i] = Chunk{target, nullptr, 0};
      });
      !why.ok()) {
    target->set_parts(1);
    target->part_done(op_failure(*target, why));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    size_t off = i * cs, clen = std::min(cs, len - off);
    FrameHeader h;
    h.type = FrameType::kWrite;
    h.seq = first + i;
    h.a = remote.key;
    h.b = raddr + off;
    h.c = raddr;  // the whole operation, so that the target refuses all of it or none
    h.d = len;
    h.length = clen;
    auto c = out_stream(target->seq() + i);
    if (c) c->post(h, src + off, clen, target);
  }
}

void TcpEndpoint::post_write_imm(const std::shared_ptr<RequestState>& req, const RemoteKey& remote, uint64_t raddr,
                                 uint64_t imm, uint32_t order) {
  uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (Status why = register_unless_failed([&] { chunks_[id] = Chunk{req, nullptr, 0}; }); !why.ok()) {
    req->complete(op_failure(*req, why));
    return;
  }
  FrameHeader h;
  h.type = FrameType::kWriteImm;
  h.seq = id;
  h.a = remote.key;
  h.b = raddr;
  h.c = imm;
  h.aux = order;
  if (Connection* c = ordered_stream()) c->post(h, nullptr, 0);
}

void TcpEndpoint::post_order_only(uint32_t order) {
  FrameHeader h;
  h.type = FrameType::kWriteImm;
  h.flags = kFlagOrderOnly;
  h.aux = order;
  if (Connection* c = ordered_stream()) c->post(h, nullptr, 0);
}

TcpEndpoint::Req TcpEndpoint::write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                    uint64_t remote_off, size_t len, const uint64_t* imm) {
  const char* op = imm ? "write_notify" : "write";
  if (Status st = health(); !st.ok()) return failed_request(op, st);
  auto req = new_request(op);
  req->bytes = len;
  const std::byte* src = local.base + local_off;
  uint64_t raddr = remote.addr + remote_off;
  uint32_t order = imm ? notify_out_.fetch_add(1, std::memory_order_relaxed) : 0;
  if (imm == nullptr) {
    post_write_chunks(req, src, remote, raddr, len);
  } else if (chunk_plan(len, false).n == 1) {
    // One frame carries data and immediate: the target notifies after placing the data.
    uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (Status why = register_unless_failed([&] { chunks_[id] = Chunk{req, nullptr, 0}; }); !why.ok()) {
      req->complete(op_failure(*req, why));
      return req;
    }
    FrameHeader h;
    h.type = FrameType::kWriteImm;
    h.seq = id;
    h.a = remote.key;
    h.b = raddr;
    h.c = *imm;
    h.aux = order;
    h.length = len;
    req->set_parts(2);  // acknowledged + released by the socket, as for write chunks
    // Up to the eager size it travels as messages do, on the connection that carries frames
    // both ways: the target's reply to the notification then leaves together with this
    // write's acknowledgement (see on_payload). Larger ones spread over the streams.
    if (len <= transport_->options().eager_max) {
      if (Connection* c = ordered_stream()) c->post(h, src, len, req);
    } else if (auto c = out_stream(req->seq())) {
      c->post(h, src, len, req);
    }
  } else {
    // Striped: the chunks may land in any order, so the immediate follows their acks.
    auto data = detail::make_request(&transport_->engine(), "write_notify data", req->seq());
    uint64_t v = *imm;
    std::weak_ptr<TcpEndpoint> self = weak_from_this();
    data->on_complete([self, req, remote, raddr, v, order](const Status& st) {
      auto ep = self.lock();
      if (!st.ok() || !ep) {
        // The target refused a chunk (or the endpoint failed, and nothing matters): without
        // its number the target would hold back every later notification.
        if (ep) ep->post_order_only(order);
        req->complete(st.ok() ? Status::Cancelled("endpoint destroyed") : st);
        return;
      }
      ep->post_write_imm(req, remote, raddr, v, order);
    });
    post_write_chunks(data, src, remote, raddr, len);
  }
  return req;
}

TcpEndpoint::Req TcpEndpoint::read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                   uint64_t remote_off, size_t len) {
  if (Status st = health(); !st.ok()) return failed_request("read", st);
  auto req = new_request("read");
  req->bytes = len;
  const ChunkPlan plan = chunk_plan(len, true);  // not a structured binding: the lambda below captures it
  const size_t n = plan.n, cs = plan.size;
  req->set_parts(static_cast<int>(n));
  uint64_t first = next_id_.fetch_add(n, std::memory_order_relaxed);
  std::byte* dst = local.base + local_off;
  if (Status why = register_unless_failed([&] {
        for (size_t i = 0; i < n; ++i) {
          size_t off = i * cs;
          chunks_[first + i] = Chunk{req, dst + off, std::min<uint64_t>(cs, len - off)};
        }
      });
      !why.ok()) {
    req->complete(op_failure(*req, why));
    return req;
  }
  for (size_t i = 0; i < n; ++i) {
    size_t off = i * cs;
    FrameHeader h;
    h.type = FrameType::kReadReq;
    h.seq = first + i;
    h.a = remote.key;
    h.b = remote.addr + remote_off + off;
    h.c = std::min<uint64_t>(cs, len - off);
    if (auto c = out_stream(req->seq() + i)) c->post(h, nullptr, 0);
  }
  return req;
}

TcpEndpoint::Req TcpEndpoint::send(const void* buf, size_t len, uint64_t tag) { return send_as(buf, len, tag, false); }

TcpEndpoint::Req TcpEndpoint::send_exchange(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq) {
  (void)done_seq;  // always a request
  return send_as(buf, len, tag, true);
}

TcpEndpoint::Req TcpEndpoint::send_as(const void* buf, size_t len, uint64_t tag, bool exchange) {
  if (Status st = health(); !st.ok()) return failed_request("send", st);
  auto req = new_request("send");
  req->bytes = len;
  req->tag = tag;
  Connection* c = ordered_stream();
  if (c == nullptr) {
    req->complete(op_failure(*req, Status::Unavailable("no connection to the peer")));
    return req;
  }
  FrameHeader h;
  h.a = tag;
  const TcpOptions& o = transport_->options();
  if (len <= (exchange ? exchange_eager_limit(o, c->through_loopback()) : o.eager_max)) {
    h.type = FrameType::kSend;
    h.seq = req->seq();
    h.length = len;
    c->post(h, buf, len, req);
    return req;
  }
  uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (Status why = register_unless_failed([&] {
        sends_[id] = SendOp{req, static_cast<const std::byte*>(buf), len};
      });
      !why.ok()) {
    req->complete(op_failure(*req, why));
    return req;
  }
  h.type = FrameType::kRts;
  h.seq = req->seq();
  h.b = id;
  h.c = len;
  c->post(h, nullptr, 0);
  return req;
}

TcpEndpoint::Req TcpEndpoint::recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) {
  auto req = new_request("recv");
  detail::PostedRecv r{static_cast<std::byte*>(buf), capacity, tag, mask, req};
  auto msg = matcher_.post(r);
  if (!msg) return req;  // queued, attached, or failed by the matcher
  if (msg->rendezvous) {
    start_cts(nullptr, std::move(r), *msg);
  } else {
    detail::deliver_eager(r, msg->data.data(), msg->length, msg->tag);
  }
  return req;
}

TcpEndpoint::Req TcpEndpoint::recv_notify() {
  auto req = new_request("recv_notify");
  matcher_.post_notify(req);
  return req;
}

void TcpEndpoint::start_cts(Connection* c, detail::PostedRecv recv, const detail::UnexpectedMsg& msg) {
  if (c == nullptr) c = ordered_stream();  // the answer to an RTS that waited for its receive
  FrameHeader h;
  h.type = FrameType::kCts;
  h.a = msg.rdv_id;
  if (msg.length > recv.capacity) {
    Status st = Status::InvalidArgument("message of {} bytes (tag {}) exceeds the receive buffer of {} bytes",
                                        msg.length, msg.tag, recv.capacity);
    h.status = static_cast<uint32_t>(st.code());
    if (c) c->post_text(h, "receiver: " + st.message());
    recv.req->complete(op_failure(*recv.req, st));
    return;
  }
  auto op = std::make_shared<RecvOp>();
  op->recv = std::move(recv);
  op->tag = msg.tag;
  op->length = msg.length;
  uint64_t token = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (Status why = register_unless_failed([&] { recvs_[token] = op; }); !why.ok()) {
    op->recv.req->complete(op_failure(*op->recv.req, why));
    return;
  }
  h.b = token;
  if (c) c->post(h, nullptr, 0);
}

void TcpEndpoint::on_header(Connection& c, RxSink& sink) {
  const FrameHeader& h = sink.hdr;
  // The peer's operations, as opposed to replies to ours (kWriteAck, kCts, kReadResp): only
  // they make a woken thread poll on for the next one (ProgressEngine::note_served).
  if (h.type != FrameType::kWriteAck && h.type != FrameType::kCts && h.type != FrameType::kReadResp)
    detail::ProgressEngine::note_served();
  switch (h.type) {
    case FrameType::kWrite:
    case FrameType::kWriteImm: {
      if (h.flags & kFlagOrderOnly) break;  // no data, nothing to check (on_payload)
      // A chunk of a striped write is checked as the whole write [c, c+d): a forged key that
      // is partly out of bounds must not get its in-bounds chunks written.
      const bool whole = h.type == FrameType::kWrite && h.d != 0;
      auto pin = whole && (h.b < h.c || h.length > h.d || h.b - h.c > h.d - h.length)
                     ? Result<detail::RegionPin>(Status::Protocol("write chunk outside its own operation"))
                     : transport_->registry().acquire(h.a, whole ? h.c : h.b, whole ? h.d : h.length,
                                                      Access::kRemoteWrite);
      if (pin.ok()) {
        sink.kind = RxSink::Kind::kData;
        sink.dst = reinterpret_cast<std::byte*>(h.b);
        sink.pin = std::move(pin).value();
      } else {
        sink.kind = RxSink::Kind::kDiscard;
        sink.error = pin.status();
        PODNET_WARN(kNet, "refused {} of {} bytes from {}: {}", frame_type_name(h.type), h.length, peer_name(),
                    pin.status().message());
      }
      break;
    }
    case FrameType::kReadReq: {
      FrameHeader r;
      r.type = FrameType::kReadResp;
      r.seq = h.seq;
      auto pin = transport_->registry().acquire(h.a, h.b, h.c, Access::kRemoteRead);
      if (!pin.ok()) {
        PODNET_WARN(kNet, "refused read of {} bytes from {}: {}", h.c, peer_name(), pin.status().message());
        r.status = static_cast<uint32_t>(pin.status().code());
        c.post_text(r, "target: " + pin.status().message());
        break;
      }
      r.length = h.c;
      // The pin travels with the frame: the region cannot finish deregistering before the
      // data has been copied into the socket.
      auto hold = std::make_shared<detail::RegionPin>(std::move(pin).value());
      c.post(r, reinterpret_cast<const void*>(h.b), h.c, nullptr, hold);
      break;
    }
    case FrameType::kReadResp: {
      if (h.status != 0) {
        sink.kind = RxSink::Kind::kControl;
        break;
      }
      std::lock_guard lk(mu_);
      auto it = chunks_.find(h.seq);
      if (it == chunks_.end() || it->second.len != h.length) {
        sink.kind = RxSink::Kind::kDiscard;
        PODNET_WARN(kNet, "unexpected read response {} of {} bytes from {}", h.seq, h.length, peer_name());
        break;
      }
      it->second.copying = true;
      sink.kind = RxSink::Kind::kData;
      sink.dst = it->second.local;
      sink.cookie_kind = kReadCookie;
      break;
    }
    case FrameType::kSend: {
      // A posted receive takes the payload directly, and nothing is allocated for it.
      std::shared_ptr<detail::UnexpectedMsg> msg;
      auto posted = matcher_.match_or_queue(h.a, [&] {
        msg = detail::make_unexpected();
        msg->tag = h.a;
        msg->length = h.length;
        return msg;
      });
      if (posted) {
        if (h.length > posted->capacity) {
          sink.kind = RxSink::Kind::kDiscard;
          detail::deliver_eager(*posted, nullptr, h.length, h.a);  // completes with the size error
          break;
        }
        sink.kind = RxSink::Kind::kData;
        sink.dst = posted->buf;
        sink.req = std::move(posted->req);
        sink.cookie_kind = kPostedCookie;
      } else {
        // Queued but not complete: a receive posted meanwhile attaches and does not read it.
        msg->data.resize(h.length);
        sink.kind = RxSink::Kind::kData;
        sink.dst = msg->data.data();
        sink.cookie = msg;
        sink.cookie_kind = kUnexpectedCookie;
      }
      break;
    }
    case FrameType::kRts: {
      auto msg = detail::make_unexpected();
      msg->tag = h.a;
      msg->length = h.c;
      msg->rendezvous = true;
      msg->rdv_id = h.b;
      if (auto posted = matcher_.match_incoming(msg)) start_cts(&c, std::move(*posted), *msg);
      break;
    }
    case FrameType::kRdvData: {
      std::shared_ptr<RecvOp> op;
      {
        std::lock_guard lk(mu_);
        auto it = recvs_.find(h.a);
        if (it != recvs_.end() && h.b <= it->second->length && h.length <= it->second->length - h.b) {
          op = it->second;
          ++op->copiers;
        }
      }
      if (!op) {
        sink.kind = RxSink::Kind::kDiscard;
        PODNET_WARN(kNet, "rendezvous data for unknown or overrun receive {} from {}", h.a, peer_name());
        break;
      }
      sink.kind = RxSink::Kind::kData;
      sink.dst = op->recv.buf + h.b;
      sink.cookie = op;
      sink.cookie_kind = kRdvCookie;
      break;
    }
    case FrameType::kWriteAck:
    case FrameType::kCts:
      sink.kind = RxSink::Kind::kControl;
      break;
    default:
      break;
  }
}

void TcpEndpoint::handle_reply(const FrameHeader& h, const std::string& control) {
  Status st;
  if (h.status != 0) st = Status(static_cast<Code>(h.status), control);
  if (h.type == FrameType::kCts) {
    SendOp op;
    {
      std::lock_guard lk(mu_);
      auto it = sends_.find(h.a);
      if (it == sends_.end()) return;
      op = std::move(it->second);
      sends_.erase(it);
    }
    if (!st.ok()) {
      op.req->complete(op_failure(*op.req, st));
      return;
    }
    const auto [n, cs] = chunk_plan(op.len, false);
    op.req->set_parts(static_cast<int>(n));
    for (size_t i = 0; i < n; ++i) {
      size_t off = i * cs, clen = std::min(cs, op.len - off);
      FrameHeader d;
      d.type = FrameType::kRdvData;
      d.a = h.b;
      d.b = off;
      d.length = clen;
      if (auto c = out_stream(i)) c->post(d, op.buf + off, clen, op.req);
    }
    return;
  }
  // kWriteAck, kReadResp: one chunk of an operation is done.
  Chunk chunk;
  {
    std::lock_guard lk(mu_);
    auto it = chunks_.find(h.seq);
    if (it == chunks_.end()) return;
    chunk = std::move(it->second);
    chunks_.erase(it);
  }
  chunk.req->part_done(st.ok() ? st : op_failure(*chunk.req, st));
}

void TcpEndpoint::on_payload(Connection& c, RxSink& sink, const std::string& control) {
  const FrameHeader& h = sink.hdr;
  switch (h.type) {
    case FrameType::kWrite:
    case FrameType::kWriteImm: {
      sink.pin.release();
      const bool notify = h.type == FrameType::kWriteImm;
      if (notify && (h.flags & kFlagOrderOnly)) {
        deliver_notification(h.aux, std::nullopt);  // the initiator's striped data was refused
        return;
      }
      FrameHeader r;
      r.type = FrameType::kWriteAck;
      r.seq = h.seq;
      if (!sink.error.ok()) {
        // Refused: no notification, but its number is used up, or the later ones would wait
        // behind it forever.
        if (notify) deliver_notification(h.aux, std::nullopt);
        r.status = static_cast<uint32_t>(sink.error.code());
        c.post_text(r, "target: " + sink.error.message());
        return;
      }
      // A notification usually has the notified thread post a frame to the initiator next
      // (a reply): the acknowledgement waits to leave with it, one sendmsg and one read
      // instead of two (TcpOptions::ack_delay_us bounds the wait). Whether a receive was
      // posted for it does not matter: in a ping-pong the next notification tends to arrive
      // together with the acknowledgement the notified thread is still waiting for.
      if (notify) deliver_notification(h.aux, h.c);
      if (notify && transport_->engine().may_defer()) {
        c.post_deferred(r);
      } else {
        c.post(r, nullptr, 0);
      }
      return;
    }
    case FrameType::kSend: {
      if (sink.cookie_kind == kPostedCookie) {
        sink.req->bytes = h.length;
        sink.req->tag = h.a;
        sink.req->complete(Status::Ok());
      } else if (sink.cookie_kind == kUnexpectedCookie) {
        auto* msg = static_cast<detail::UnexpectedMsg*>(sink.cookie.get());
        if (auto attached = matcher_.finish_unexpected(*msg))
          detail::deliver_eager(*attached, msg->data.data(), msg->length, msg->tag);
      }
      return;
    }
    case FrameType::kRdvData: {
      if (sink.cookie_kind != kRdvCookie) return;
      auto* op = static_cast<RecvOp*>(sink.cookie.get());
      const size_t got = op->received.fetch_add(h.length) + h.length;
      if (got == op->length) {
        if (!release_rdv(*op, h.a, /*whole=*/true).has_value()) return;
        op->recv.req->bytes = op->length;
        op->recv.req->tag = op->tag;
        op->recv.req->complete(Status::Ok());
      } else if (auto failed = release_rdv(*op, h.a, /*whole=*/false)) {
        op->recv.req->complete(op_failure(*op->recv.req, *failed));
      }
      return;
    }
    case FrameType::kWriteAck:
    case FrameType::kReadResp:
    case FrameType::kCts:
      handle_reply(h, control);
      return;
    default:
      return;
  }
}

void TcpEndpoint::deliver_notification(uint32_t order, std::optional<uint64_t> imm) {
  std::vector<uint64_t> ready;
  {
    std::lock_guard lk(notify_mu_);
    if (order != notify_next_) {
      notify_early_[order] = imm;  // an earlier write_notify is still on its way
      return;
    }
    if (imm) ready.push_back(*imm);
    ++notify_next_;
    for (auto it = notify_early_.find(notify_next_); it != notify_early_.end(); it = notify_early_.find(notify_next_)) {
      if (it->second) ready.push_back(*it->second);
      notify_early_.erase(it);
      ++notify_next_;
    }
    // Deliver under the lock so that a later frame cannot slip its imm in between.
    for (uint64_t v : ready) {
      if (auto req = matcher_.notify_incoming(v)) req->complete(Status::Ok());
    }
  }
}

void TcpEndpoint::on_stream_open(Connection& c) {
  const uint32_t m = c.mss();
  uint32_t cur = mss_.load(std::memory_order_relaxed);
  while (m > 0 && (cur == 0 || m < cur) && !mss_.compare_exchange_weak(cur, m, std::memory_order_relaxed)) {
  }
  PODNET_DEBUG(kNet, "stream {} to {} open (mss {})", c.stream(), peer_name(), m);
}

void TcpEndpoint::on_bye(Connection&) {
  graceful_.store(true);
  // The peer says bye on every connection after everything it queued there: frames it sent
  // before may still be unread on the others (its messages on one, its writes on another).
  // The endpoint fails once they are all closed; the connection closes before it calls this,
  // so of two byes handled at once, at least the later check sees both closed.
  for (const auto& c : connections())
    if (c->state() != Connection::State::kClosed) return;
  fail(Status::PeerFailed("{} shut down its side of the connection", peer_name()));
}

void TcpEndpoint::on_connection_failed(Connection& c, const Status& why) {
  fail(Status(why.code(),
              fmt::format("{} stream {}: {}", c.outgoing() ? "outgoing" : "incoming", c.stream(), why.message())));
}

std::optional<Status> TcpEndpoint::release_rdv(RecvOp& op, uint64_t token, bool whole) {
  std::lock_guard lk(mu_);
  --op.copiers;
  auto it = recvs_.find(token);
  if (it == recvs_.end() || it->second.get() != &op) return std::nullopt;  // completed already
  if (whole) {
    recvs_.erase(it);
    return Status::Ok();
  }
  if (failed_.ok() || op.copiers > 0) return std::nullopt;
  recvs_.erase(it);
  return failed_;
}

void TcpEndpoint::abort_payload(RxSink& sink) {
  if (sink.cookie_kind == kRdvCookie) {
    auto* op = static_cast<RecvOp*>(sink.cookie.get());
    if (auto failed = release_rdv(*op, sink.hdr.a, /*whole=*/false))
      op->recv.req->complete(op_failure(*op->recv.req, *failed));
    return;
  }
  if (sink.cookie_kind == kReadCookie) {
    Chunk chunk;
    Status failed;
    {
      std::lock_guard lk(mu_);
      auto it = chunks_.find(sink.hdr.seq);
      if (it == chunks_.end()) return;
      it->second.copying = false;
      if (failed_.ok()) return;  // fail() takes it with the rest
      failed = failed_;
      chunk = std::move(it->second);
      chunks_.erase(it);
    }
    chunk.req->part_done(op_failure(*chunk.req, failed));
    return;
  }
  if (!sink.req) return;
  Status why = health();
  if (why.ok()) why = Status::PeerFailed("the connection closed with the message half received");
  sink.req->complete(op_failure(*sink.req, why));
}

std::vector<std::shared_ptr<Connection>> TcpEndpoint::connections() const {
  std::lock_guard lk(conn_mu_);
  std::vector<std::shared_ptr<Connection>> conns = out_;
  for (const auto& c : in_)
    if (c) conns.push_back(c);
  return conns;
}

void TcpEndpoint::tick(int64_t now) {
  const std::vector<std::shared_ptr<Connection>> conns = connections();
  for (auto& c : conns) c->tick(now);
}

void TcpEndpoint::close_gracefully() {
  graceful_.store(true);  // the peer closing in answer to our bye is expected, not a failure
  const std::vector<std::shared_ptr<Connection>> conns = connections();
  FrameHeader h;
  h.type = FrameType::kBye;
  for (auto& c : conns) c->post(h, nullptr, 0);
}

void TcpEndpoint::fail(const Status& why) {
  std::unordered_map<uint64_t, Chunk> chunks;
  std::unordered_map<uint64_t, SendOp> sends;
  std::unordered_map<uint64_t, std::shared_ptr<RecvOp>> recvs;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) return;
    failed_ = why.ok() ? Status::Internal("endpoint failed without a reason") : why;
    has_failed_.store(true, std::memory_order_release);
    // A connection copying into a read's or receive's buffer completes it when it is done.
    take_unless(chunks_, chunks, [](const Chunk& c) { return c.copying; });
    sends.swap(sends_);
    take_unless(recvs_, recvs, [](const std::shared_ptr<RecvOp>& r) { return r->copiers > 0; });
  }
  if (why.code() == Code::kCancelled || graceful_.load())
    PODNET_INFO(kNet, "{}: {}", peer_name(), why.message());
  else
    PODNET_WARN(kNet, "peer {} failed: {}", peer_name(), why.message());
  for (auto& [id, ch] : chunks) ch.req->part_done(op_failure(*ch.req, why));
  for (auto& [id, s] : sends) s.req->complete(op_failure(*s.req, why));
  for (auto& [id, r] : recvs) r->recv.req->complete(op_failure(*r->recv.req, why));
  matcher_.fail(Status(why.code(), fmt::format("recv from {}: {}", peer_name(), why.message())));
  const std::vector<std::shared_ptr<Connection>> conns = connections();
  for (auto& c : conns) c->fail(why, /*notify=*/false);
}

}  // namespace podnet::tcp
