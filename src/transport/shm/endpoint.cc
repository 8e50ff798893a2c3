#include "transport/shm/endpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/copy.h"
#include "base/log.h"
#include "transport/shm/transport.h"

namespace podnet::shm {

using detail::RequestState;

namespace {
constexpr int kRecordsPerPoll = 64;

void complete_all(Completions& done) {
  done.drain([](const std::shared_ptr<RequestState>& r) { r->complete(Status::Ok()); });
}

}  // namespace

ShmEndpoint::ShmEndpoint(ShmTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_socket,
                         pid_t peer_pid)
    : transport_(transport),
      peer_id_(peer_id),
      peer_rank_(peer_rank),
      peer_socket_(std::move(peer_socket)),
      peer_pid_(peer_pid),
      created_ns_(now_ns()) {}

ShmEndpoint::~ShmEndpoint() {
  if (pidfd_.load() >= 0) close(pidfd_.load());
}

std::string ShmEndpoint::peer_name() const { return fmt::format("rank {} (shm pid {})", peer_rank_, peer_pid_.load()); }

Result<std::shared_ptr<Channel>> ShmEndpoint::start_outgoing() {
  std::lock_guard lk(ch_mu_);
  if (out_) return std::shared_ptr<Channel>();
  const auto& o = transport_->options();
  auto ch = Channel::connect(peer_socket_, o.ring_bytes, o.bulk_bytes, transport_->ctx_id(), transport_->rank(),
                             transport_->doorbell(), o.commit_max);
  if (!ch.ok()) return ch.status().with_context("connect to {}", peer_name());
  out_ = *ch;
  out_raw_.store(out_.get(), std::memory_order_release);
  return out_;
}

Status ShmEndpoint::attach_incoming(std::shared_ptr<Channel> c) {
  std::lock_guard lk(ch_mu_);
  if (in_) return Status::Protocol("{} connected twice", peer_name());
  peer_pid_.store(c->peer_pid());
  in_ = std::move(c);
  in_raw_.store(in_.get(), std::memory_order_release);
  return {};
}

void ShmEndpoint::on_reply(const Hello& reply, int peer_doorbell) {
  Channel* ch = out_raw_.load(std::memory_order_acquire);
  if (!ch) return;
  peer_pid_.store(reply.pid);
  bool push = reply.cma != 0 && probe_cma(reply.pid, reply.probe_addr, SegmentHeader::kMagic, peer_name());
  ch->set_ready(reply.pid, reply.cma != 0 && transport_->options().cma, push, peer_doorbell);
  PODNET_INFO(kNet, "shm channel to {} ready (single-copy {}, split copies {})", peer_name(), ch->cma() ? "on" : "off",
              ch->cma_push() ? "on" : "off");
  Completions done;
  ch->drain(done);
  complete_all(done);
}

Status ShmEndpoint::health() const {
  std::lock_guard lk(mu_);
  return failed_;
}

std::shared_ptr<RequestState> ShmEndpoint::new_request(const char* op) {
  return detail::make_request(&transport_->engine(), op, next_seq_.fetch_add(1, std::memory_order_relaxed));
}

Status ShmEndpoint::op_failure(const RequestState& r, const Status& why) const {
  return Status(why.code(), fmt::format("{} seq {} with {}: {}", r.op(), r.seq(), peer_name(), why.message()));
}

ShmEndpoint::Req ShmEndpoint::failed_request(const char* op, const Status& why) {
  auto r = new_request(op);
  r->complete(op_failure(*r, why));
  return r;
}

Status ShmEndpoint::track(uint64_t seq, Op op) {
  std::lock_guard lk(mu_);
  if (!failed_.ok()) return failed_;
  ops_.emplace(seq, std::move(op));
  return {};
}

void ShmEndpoint::post(Channel& ch, OutOp op, const Req* req) {
  Completions done;
  switch (ch.post(op, done, req)) {
    case Channel::Posted::kEmitted:
      if (req != nullptr) (*req)->complete(Status::Ok());
      break;
    case Channel::Posted::kQueuedFirst:
      // Wake the background thread once per queue that forms (not on every post behind it):
      // it drains the queue, and arms producer_waiting before it sleeps again.
      transport_->engine().wake();
      break;
    case Channel::Posted::kQueued:
      break;
    case Channel::Posted::kRefused:  // the endpoint failed between the caller's check and this post
      if (const Req& r = req != nullptr ? *req : op.on_emitted) r->complete(op_failure(*r, health()));
      break;
  }
  complete_all(done);
}

ShmEndpoint::Req ShmEndpoint::write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                    uint64_t remote_off, size_t len, const uint64_t* imm) {
  const char* name = imm != nullptr ? "write_notify" : "write";
  Channel* ch = out_raw_.load(std::memory_order_acquire);
  if (!ch) return failed_request(name, Status::Unavailable("not connected"));
  const std::byte* src = local.base + local_off;
  const CopyPlan plan = plan_copy(*ch, local, remote.key, len, /*read=*/false);
  if (imm == nullptr && !plan.shared) {
    if (Req r = copy_mapped(*ch, name, remote.key, remote.addr + remote_off, const_cast<std::byte*>(src), len, false))
      return r;
  }
  auto req = new_request(name);
  req->bytes = len;
  if (Status why = track(req->seq(), Op{req, const_cast<std::byte*>(src), len}); !why.ok()) {
    req->complete(op_failure(*req, why));
    return req;
  }
  OutOp op;
  op.hdr.seq = req->seq();
  op.hdr.key = remote.key;
  op.hdr.addr = remote.addr + remote_off;
  op.hdr.len = len;
  op.hdr.imm = imm != nullptr ? *imm : 0;
  op.hdr.flags = imm != nullptr ? kNotify : 0;
  if (ch->ready() && ch->cma() && len > transport_->options().eager_max) {
    op.hdr.type = Rec::kWriteCma;
    op.hdr.aux = reinterpret_cast<uint64_t>(src);
    if (plan.split) op.hdr.flags |= kSplit;
    if (plan.own_key) attach_own_key(op, local.key);
  } else {
    op.hdr.type = Rec::kWrite;
    op.src = src;
    op.len = len;
    op.fragments = true;
  }
  post(*ch, std::move(op));
  return req;
}

ShmEndpoint::Req ShmEndpoint::read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                   uint64_t remote_off, size_t len) {
  Channel* ch = out_raw_.load(std::memory_order_acquire);
  if (!ch) return failed_request("read", Status::Unavailable("not connected"));
  std::byte* dst = local.base + local_off;
  const CopyPlan plan = plan_copy(*ch, local, remote.key, len, /*read=*/true);
  if (!plan.shared) {
    if (Req r = copy_mapped(*ch, "read", remote.key, remote.addr + remote_off, dst, len, true)) return r;
  }
  auto req = new_request("read");
  req->bytes = len;
  if (Status why = track(req->seq(), Op{req, dst, len, /*read=*/true}); !why.ok()) {
    req->complete(op_failure(*req, why));
    return req;
  }
  OutOp op;
  op.hdr.type = Rec::kRead;
  op.hdr.seq = req->seq();
  op.hdr.key = remote.key;
  op.hdr.addr = remote.addr + remote_off;
  op.hdr.len = len;
  op.hdr.aux = reinterpret_cast<uint64_t>(dst);
  if (plan.split) op.hdr.flags |= kSplit;
  if (plan.own_key) attach_own_key(op, local.key);
  post(*ch, std::move(op));
  return req;
}

ShmEndpoint::Req ShmEndpoint::post_send(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq, bool may_split) {
  Channel* ch = out_raw_.load(std::memory_order_acquire);
  if (!ch) return failed_request("send", Status::Unavailable("not connected"));
  // Past the eager size a send waits for its receive: pulled with one cross-memory copy, or
  // without cross-memory attach sent through the ring once the receive is posted (kRing).
  // That path keeps messages up to a quarter of the ring (at most 256 KiB) eager: a receiver
  // that posts one receive at a time took twice as long for 64 KiB messages with a round trip
  // before each, and an eager 1 MiB message it had not asked for yet was copied twice.
  // Before the channel is up nobody knows yet whether cross-memory attach will work: a send
  // past both limits announces itself all the same, and a receiver that cannot reach this
  // side's memory answers as for kRing (on_request).
  const bool ready = ch->ready();  // read once: the decisions below must agree
  const bool cma = ready && ch->cma();
  const size_t eager = transport_->options().eager_max;
  const bool rendezvous = len > (cma ? eager : std::max(eager, ch->ring_eager_max()));
  RecHdr hdr{};
  hdr.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  hdr.key = tag;
  hdr.len = len;
  // A message in one record goes straight into the ring when nothing is queued before it,
  // before any request exists: the receiver's clock starts here. The caller that takes a
  // completed send without a request object gets none at all.
  bool sent = false;
  if (!rendezvous && !failed_flag_.load(std::memory_order_acquire)) {
    RecHdr one = hdr;
    one.type = Rec::kSend;
    one.flags = kFirst | kLast;
    sent = ch->try_emit_record(one, buf, len);
    if (sent && done_seq != nullptr) {
      *done_seq = hdr.seq;
      return nullptr;
    }
  }
  auto req = detail::make_request(&transport_->engine(), "send", hdr.seq);
  req->bytes = len;
  req->tag = tag;
  if (sent) {
    req->complete(Status::Ok());
    return req;
  }
  if (rendezvous) {
    {
      std::lock_guard lk(mu_);
      if (!failed_.ok()) {
        req->complete(op_failure(*req, failed_));
        return req;
      }
      sends_.emplace(req->seq(), Op{req, static_cast<std::byte*>(const_cast<void*>(buf)), len});
    }
    OutOp op;
    op.hdr = hdr;
    op.hdr.type = Rec::kRts;
    op.hdr.aux = reinterpret_cast<uint64_t>(buf);
    if (ready && !cma)
      op.hdr.flags |= kRing;
    else if (transport_->options().map)
      op.hdr.imm = transport_->registry().allocated_key(buf, len);
    if (may_split && cma && ch->cma_push() && transport_->split(len)) {
      op.hdr.flags |= kSplit;
      req->set_parts(2);  // our push, and the receiver's kFin
    }
    post(*ch, std::move(op));
    return req;
  }
  if (failed_flag_.load(std::memory_order_acquire)) {
    req->complete(op_failure(*req, health()));
    return req;
  }
  hdr.type = Rec::kSend;
  OutOp op;
  op.hdr = hdr;
  op.src = static_cast<const std::byte*>(buf);
  op.len = len;
  op.fragments = true;
  post(*ch, std::move(op), &req);
  return req;
}

ShmEndpoint::Req ShmEndpoint::recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) {
  auto req = new_request("recv");
  detail::PostedRecv r{static_cast<std::byte*>(buf), capacity, tag, mask, req};
  auto msg = matcher_.post(r);
  if (!msg) return req;  // queued, attached, or failed by the matcher
  if (msg->rendezvous) pull_rendezvous(std::move(r), msg->rdv_id, msg->length, msg->tag, msg->split);
  else detail::deliver_eager(r, msg->data.data(), msg->length, msg->tag);
  return req;
}

ShmEndpoint::Req ShmEndpoint::recv_notify() {
  auto req = new_request("recv_notify");
  matcher_.post_notify(req);
  return req;
}

void ShmEndpoint::reply(const RecHdr& req, Rec type, const Status& st, uint8_t flags) {
  Channel* ch = in_raw_.load(std::memory_order_acquire);
  if (!ch) return;
  OutOp op;
  op.hdr.type = type;
  op.hdr.seq = req.seq;
  op.hdr.flags = flags;
  op.hdr.code = static_cast<uint16_t>(st.code());
  if (!st.ok()) {
    op.owned = st.message().substr(0, 1024);  // emit() sends `owned` when it is set
    op.len = op.owned.size();
  }
  post(*ch, std::move(op));
}

int ShmEndpoint::poll() {
  int n = 0;
  Completions done;
  Channel* o = out_raw_.load(std::memory_order_acquire);
  Channel* i = in_raw_.load(std::memory_order_acquire);
  if (o != nullptr) {
    n += o->drain(done);
    if (o->ready()) n += o->consume(kRecordsPerPoll, [this](const RecHdr& h) { on_reply_record(h); });
  }
  if (i != nullptr) {
    n += i->consume(kRecordsPerPoll, [this](const RecHdr& h) { on_request(h); });
    n += i->drain(done);
  }
  if (!done.empty()) complete_all(done);
  return n;
}

namespace {
constexpr int kPeerMemoryOpen = 0, kSaidGoodbye = 1, kPeerHungUp = 2, kEndpointFailed = 3;
}  // namespace

Status ShmEndpoint::peer_memory_closed() const {
  switch (peer_memory_.load(std::memory_order_acquire)) {
    case kSaidGoodbye:
      return Status::Cancelled("the local context is closing: no more copies with {}'s memory", peer_name());
    case kPeerHungUp:
      return Status::PeerFailed("{} hung up: its memory is not copied into or out of any more", peer_name());
    case kEndpointFailed:  // no health(): callers may hold mu_
      return Status::PeerFailed("the endpoint to {} failed", peer_name());
    default:
      return {};
  }
}

Status ShmEndpoint::enter_peer_copy() {
  // Dekker with close_gracefully(): it stores the state, then reads the count; this adds to
  // the count, then reads the state. One of the two sees the other.
  peer_copies_.fetch_add(1, std::memory_order_seq_cst);
  if (peer_memory_.load(std::memory_order_seq_cst) == kPeerMemoryOpen) return {};
  leave_peer_copy();
  return peer_memory_closed();
}

void ShmEndpoint::close_peer_memory(int why) {
  int open = kPeerMemoryOpen;  // a reason given already stays
  peer_memory_.compare_exchange_strong(open, why, std::memory_order_seq_cst);
  while (peer_copies_.load(std::memory_order_seq_cst) > 0) std::this_thread::yield();
}

Status ShmEndpoint::recv_failure(const Status& why) const {
  return Status(why.code(), fmt::format("recv from {}: {}", peer_name(), why.message()));
}

void ShmEndpoint::drain_departed(bool peer_waits) {
  int open = kPeerMemoryOpen;  // a goodbye said already stays the reason
  if (!peer_waits) peer_memory_.compare_exchange_strong(open, kPeerHungUp, std::memory_order_acq_rel);
  Completions done;
  Channel* o = out_raw_.load(std::memory_order_acquire);
  Channel* i = in_raw_.load(std::memory_order_acquire);
  if (o != nullptr && o->ready()) o->consume_all([this](const RecHdr& h) { on_reply_record(h); });
  if (i != nullptr) i->consume_all([this](const RecHdr& h) { on_request(h); });
  if (o != nullptr) o->drain(done);
  if (i != nullptr) i->drain(done);
  if (!done.empty()) complete_all(done);
}

bool ShmEndpoint::arm() {
  Channel* o = out_raw_.load(std::memory_order_acquire);
  Channel* i = in_raw_.load(std::memory_order_acquire);
  if (o != nullptr && o->ready() && !o->arm()) return false;
  if (i != nullptr && !i->arm()) return false;
  return true;
}

void ShmEndpoint::disarm() {
  Channel* o = out_raw_.load(std::memory_order_acquire);
  Channel* i = in_raw_.load(std::memory_order_acquire);
  if (o != nullptr) o->disarm();
  if (i != nullptr) i->disarm();
}

void ShmEndpoint::on_request(const RecHdr& h) {
  switch (h.type) {
    case Rec::kSend:
      on_send_fragment(h);
      break;
    case Rec::kRdvData:
      on_rdv_data(h);
      break;
    case Rec::kRts: {
      auto msg = detail::make_unexpected();
      msg->tag = h.key;
      msg->length = h.len;
      msg->rendezvous = true;
      msg->rdv_id = h.seq;
      {
        // Through the ring when the sender asked for it, or when this side cannot reach the
        // sender's memory (a send posted before the channel was up did not know).
        Channel* in = in_raw_.load(std::memory_order_acquire);
        const bool ring = (h.flags & kRing) != 0 || in == nullptr || !in->cma();
        std::lock_guard lk(mu_);
        rts_src_[h.seq] = RtsSource{h.aux, h.imm, ring};
      }
      msg->split = (h.flags & kSplit) != 0;
      if (auto posted = matcher_.match_incoming(msg))
        pull_rendezvous(std::move(*posted), h.seq, h.len, h.key, msg->split);
      break;
    }
    case Rec::kPushDone: {
      std::shared_ptr<RequestState> req;
      bool split_op = false;
      {
        std::lock_guard lk(mu_);
        auto it = split_recvs_.find(h.seq);
        if (it == split_recvs_.end()) {
          split_op = split_ops_.count(h.seq) != 0;
        } else {
          req = std::move(it->second);
          split_recvs_.erase(it);
        }
      }
      if (split_op) {
        Status st = h.code == 0 ? Status::Ok()
                                : Status(static_cast<Code>(h.code),
                                         std::string(reinterpret_cast<const char*>(payload(&h)), h.plen));
        split_part_done(h.seq, st);
        break;
      }
      if (!req) break;
      Status st = h.code == 0 ? Status::Ok()
                              : op_failure(*req, Status(static_cast<Code>(h.code),
                                                        std::string(reinterpret_cast<const char*>(payload(&h)), h.plen)));
      req->part_done(st);
      break;
    }
    case Rec::kWrite:
    case Rec::kWriteCma:
      on_write(h);
      break;
    case Rec::kRead:
      on_read(h);
      break;
    case Rec::kMapReq:
      on_map_request(h);
      break;
    default:
      PODNET_WARN(kNet, "unexpected shm record type {} from {}", static_cast<int>(h.type), peer_name());
  }
}

void ShmEndpoint::on_send_fragment(const RecHdr& h) {
  if ((h.flags & (kFirst | kLast)) == (kFirst | kLast) && h.plen == h.len && h.aux == 0) {
    // The whole message in one record (every small message): match, copy, complete, with
    // no reassembly state. An unexpected one is queued already complete.
    auto posted = matcher_.match_or_queue(h.key, [&] {
      auto msg = detail::make_unexpected();
      msg->tag = h.key;
      msg->length = h.len;
      msg->data.assign(payload(&h), payload(&h) + h.plen);
      msg->complete = true;
      return msg;
    });
    if (posted) detail::deliver_eager(*posted, payload(&h), h.len, h.key);  // a size error too
    return;
  }
  Incoming& in = incoming_;
  if (h.flags & kFirst) {
    in = Incoming{};
    std::shared_ptr<detail::UnexpectedMsg> msg;
    auto posted = matcher_.match_or_queue(h.key, [&] {
      msg = detail::make_unexpected();
      msg->tag = h.key;
      msg->length = h.len;
      msg->data.resize(h.len);
      return msg;
    });
    if (posted) {
      if (h.len > posted->capacity) {
        detail::deliver_eager(*posted, nullptr, h.len, h.key);  // completes with the size error
        in.discard = true;
      } else {
        in.dst = posted->buf;
        in.posted = std::move(posted);
      }
    } else {
      in.dst = msg->data.data();
      in.msg = std::move(msg);
    }
  }
  if (!in.discard && h.plen > 0) {
    if (h.aux + h.plen > h.len || (!in.posted && !in.msg)) {
      // After fail() dropped the message, its later fragments are no news.
      if (!failed_flag_.load(std::memory_order_acquire))
        PODNET_WARN(kNet, "shm message fragment out of order from {}", peer_name());
      return;
    }
    // Into a posted receive, a large message's fragments stream past the caches; a buffer
    // for an unexpected one is read again soon (the copy into the receive).
    copy_part_to_output(in.dst + h.aux, payload(&h), h.plen, in.posted ? h.len : 0);
  }
  if (!(h.flags & kLast)) {
    // fail() could not wait for this thread (Channel::with_consumer_lock gives up after a
    // while): the receive is this thread's to fail.
    if (in.posted && failed_flag_.load(std::memory_order_acquire)) {
      std::shared_ptr<RequestState> req = std::move(in.posted->req);
      in = Incoming{};
      req->complete(recv_failure(health()));
    }
    return;
  }
  // Taken out first: completing runs callbacks, which may post and reach fail().
  Incoming whole = std::move(in);
  in = Incoming{};
  if (whole.posted) {
    std::shared_ptr<RequestState> req = std::move(whole.posted->req);
    req->bytes = h.len;
    req->tag = h.key;
    req->complete(Status::Ok());
  } else if (whole.msg) {
    if (auto attached = matcher_.finish_unexpected(*whole.msg))
      detail::deliver_eager(*attached, whole.msg->data.data(), whole.msg->length, whole.msg->tag);
  }
}

std::optional<ShmEndpoint::Op> ShmEndpoint::take_send(uint64_t seq) {
  std::lock_guard lk(mu_);
  auto it = sends_.find(seq);
  if (it == sends_.end()) return std::nullopt;
  Op op = std::move(it->second);
  sends_.erase(it);
  return op;
}

void ShmEndpoint::on_rdv_data(const RecHdr& h) {
  // The fragments of one send arrive in order, back to back (a queued operation is emitted
  // whole before the next): the receive is looked up per fragment, and taken on the last.
  // A fragment outside the message fails the receive at once; the rest of it is dropped.
  const bool last = (h.flags & kLast) != 0;
  std::byte* buf = nullptr;
  size_t len = 0;
  std::shared_ptr<RequestState> req;  // taken with the last (or a bad) fragment only
  bool bad = false;
  {
    std::lock_guard lk(mu_);
    auto it = ring_recvs_.find(h.seq);
    if (it == ring_recvs_.end()) return;  // failed meanwhile (or by a bad fragment)
    buf = it->second.buf;
    len = it->second.len;
    bad = h.aux > len || h.plen > len - h.aux;
    if (bad || last) {
      req = std::move(it->second.req);
      ring_recvs_.erase(it);
    }
  }
  if (bad) {
    PODNET_WARN(kNet, "shm rendezvous fragment [{}, +{}) outside the {}-byte message from {}", h.aux, h.plen, len,
                peer_name());
    req->complete(op_failure(
        *req, Status::Protocol("rendezvous fragment [{}, +{}) outside the {}-byte message", h.aux, h.plen, len)));
    return;
  }
  if (h.plen > 0) copy_part_to_output(buf + h.aux, payload(&h), h.plen, len);
  if (last) req->complete(Status::Ok());
}

void ShmEndpoint::on_reply_record(const RecHdr& h) {
  if (h.type == Rec::kCts) {
    on_cts(h);
    return;
  }
  if (h.type == Rec::kMapResp) {
    on_map_reply(h);
    return;
  }
  if (h.type == Rec::kFin) {
    std::optional<Op> taken = take_send(h.seq);
    if (!taken) return;
    Op& op = *taken;
    Status st = h.code == 0 ? Status::Ok()
                            : op_failure(*op.req, Status(static_cast<Code>(h.code),
                                                         std::string(reinterpret_cast<const char*>(payload(&h)), h.plen)));
    if (st.ok()) op.req->part_done(st);  // a split send also waits for its own push
    else op.req->complete(st);
    return;
  }
  if (h.type != Rec::kAck && h.type != Rec::kReadData) {
    PODNET_WARN(kNet, "unexpected shm reply type {} from {}", static_cast<int>(h.type), peer_name());
    return;
  }
  const bool last = (h.flags & kLast) != 0;
  auto reason = [&] {
    return Status(static_cast<Code>(h.code), std::string(reinterpret_cast<const char*>(payload(&h)), h.plen));
  };
  Op op;
  {
    std::lock_guard lk(mu_);
    auto it = ops_.find(h.seq);
    if (it == ops_.end()) return;
    if (h.type == Rec::kAck && h.code != 0 && !last) {
      // A refused fragment of a write: its later fragments are still queued and copy from
      // the source; the user may free it once the request completes, so that waits for the
      // last fragment's acknowledgement.
      if (it->second.refused.ok()) it->second.refused = reason();
      return;
    }
    op = last ? std::move(it->second) : it->second;
    if (last) ops_.erase(it);
  }
  if (h.type == Rec::kReadData) {
    if (h.plen > 0 && h.aux + h.plen <= op.len) copy_part_to_output(op.dst + h.aux, payload(&h), h.plen, op.len);
    if (last) op.req->complete(Status::Ok());
    return;
  }
  if (!op.refused.ok() || h.code != 0) {
    op.req->complete(op_failure(*op.req, !op.refused.ok() ? op.refused : reason()));
  } else if (last) {
    op.req->complete(Status::Ok());
  }
}

void ShmEndpoint::check_liveness(Channel& ch, Liveness& l, int64_t now, const char* which) {
  uint64_t hb = ch.peer_heartbeat();
  if (hb != l.seen || l.since_ns == 0) {
    l.seen = hb;
    l.since_ns = now;
    return;
  }
  int64_t silent_ms = (now - l.since_ns) / 1'000'000;
  if (silent_ms > transport_->options().peer_timeout_ms)
    fail(Status::PeerFailed("no data or heartbeat for {} ms on the {} shared-memory channel "
                            "(PODNET_PEER_TIMEOUT_MS={}): the process is stopped or hung",
                            silent_ms, which, transport_->options().peer_timeout_ms));
}

void ShmEndpoint::tick(int64_t now) {
  drop_revoked_mappings();
  if (failed_flag_.load(std::memory_order_acquire)) return;
  Channel* o = out_raw_.load(std::memory_order_acquire);
  Channel* i = in_raw_.load(std::memory_order_acquire);
  if (i) {
    i->beat();
    check_liveness(*i, in_live_, now, "incoming");
  }
  if (o) {
    o->beat();
    if (o->ready()) {
      check_liveness(*o, out_live_, now, "outgoing");
    } else if ((now - created_ns_) / 1'000'000 > transport_->options().connect_timeout_ms) {
      fail(Status::Timeout("no answer to the shared-memory hello within {} ms (PODNET_CONNECT_TIMEOUT_MS)",
                           transport_->options().connect_timeout_ms));
    }
  }
}

void ShmEndpoint::close_gracefully() {
  // This side is leaving: the peer's hang-up in answer is no news.
  set_graceful();
  // Copies with the peer's memory already running finish before the goodbye: the peer fails
  // right after it handled it, and hands its buffers back.
  close_peer_memory(kSaidGoodbye);
  for (Channel* ch : {out_raw_.load(), in_raw_.load()}) {
    if (ch != nullptr) ch->say_bye();
  }
}

bool ShmEndpoint::awaits_goodbye() const {
  if (failed_flag_.load(std::memory_order_acquire)) return false;
  for (Channel* ch : {out_raw_.load(), in_raw_.load()})
    if (ch != nullptr && ch->ready()) return true;
  return false;  // never open: the peer has nothing of this side's to handle
}

void ShmEndpoint::hang_up() {
  for (Channel* ch : {out_raw_.load(), in_raw_.load()}) {
    if (ch != nullptr) ch->hang_up();
  }
}

void ShmEndpoint::fail(const Status& why) {
  std::unordered_map<uint64_t, Op> ops, sends;
  std::unordered_map<uint64_t, std::shared_ptr<RequestState>> split;
  std::unordered_map<uint64_t, RingRecv> ring;
  std::unordered_map<uint64_t, SplitOp> split_ops;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) return;
    failed_ = why.ok() ? Status::Internal("endpoint failed without a reason") : why;
    failed_flag_.store(true, std::memory_order_release);
    ops.swap(ops_);
    sends.swap(sends_);
    split.swap(split_recvs_);
    ring.swap(ring_recvs_);
    split_ops.swap(split_ops_);
    rts_src_.clear();
  }
  {
    std::lock_guard lk(map_mu_);
    for (auto& [key, m] : maps_) m.reset();  // a failed peer's memory is no target any more
  }
  // Nothing is handed back while this process may still copy into or out of it: a record
  // being handled (another thread's consume) may hold an operation taken out of the maps
  // above, a split copy into a region whose pin is in split_ops, or the receive a message's
  // fragments are filling (incoming_, which only the consumer touches); the queues may be
  // emitting a write's fragments from its source.
  std::optional<detail::PostedRecv> filling;
  for (Channel* ch : {out_raw_.load(), in_raw_.load()}) {
    if (ch == nullptr) continue;
    ch->with_consumer_lock([&] {
      if (ch != in_raw_.load()) return;
      filling = std::move(incoming_.posted);
      incoming_ = Incoming{};
    });
  }
  // Copies with the peer's memory that run outside the consumers (a receive's pull on the
  // user's thread, in recv()) finish too, and none starts from here on.
  close_peer_memory(kEndpointFailed);
  std::vector<std::shared_ptr<RequestState>> unsent;
  for (Channel* ch : {out_raw_.load(), in_raw_.load()}) {
    if (ch == nullptr) continue;
    for (auto& r : ch->close_queue()) unsent.push_back(std::move(r));
  }
  split_ops.clear();  // releases the pinned regions
  for (auto& [seq, r] : split) r->complete(op_failure(*r, why));
  for (auto& [seq, r] : ring) r.req->complete(op_failure(*r.req, why));
  if (why.code() == Code::kCancelled || graceful_.load())
    PODNET_INFO(kNet, "{}: {}", peer_name(), why.message());
  else
    PODNET_WARN(kNet, "peer {} failed: {}", peer_name(), why.message());
  for (auto& [seq, op] : ops) op.req->complete(op_failure(*op.req, why));
  for (auto& [seq, op] : sends) op.req->complete(op_failure(*op.req, why));
  for (auto& r : unsent) r->complete(op_failure(*r, why));
  const Status recv_why = recv_failure(why);
  if (filling) filling->req->complete(recv_why);  // as the matcher completes the others
  matcher_.fail(recv_why);
}

}  // namespace podnet::shm
