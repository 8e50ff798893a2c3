// VerbsEndpoint: connection set-up and the posting side (user calls, the local FIFO and
// what pump() may post). Completions are handled in completion.cc.
#include "transport/verbs/endpoint.h"

#include <arpa/inet.h>

#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "transport/request.h"
#include "transport/verbs/transport.h"

namespace podnet::verbs {

VerbsEndpoint::VerbsEndpoint(VerbsTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_host)
    : transport_(transport), peer_id_(peer_id), peer_rank_(peer_rank), peer_host_(std::move(peer_host)) {
  created_ns_ = now_ns();
}

VerbsEndpoint::~VerbsEndpoint() { release_resources(); }

std::string VerbsEndpoint::peer_name() const { return fmt::format("rank {} ({})", peer_rank_, peer_host_); }

Status VerbsEndpoint::ensure_cq() {
  if (cq_.load(std::memory_order_acquire) != nullptr) return {};
  const auto& o = transport_->options();
  Device& d = transport_->device();
  // Both QPs: send queues, the request QP's reply buffers and the serve QP's buffers; then
  // each data lane's send queue and its one receive buffer.
  int cqe = 2 * o.sq_depth + 3 * o.recv_depth + 64 + 2 * (o.qps - 1) * (o.sq_depth + 1);
  ibv_cq* cq = ibv_create_cq(d.ctx, cqe, this, transport_->channel(), 0);
  if (cq == nullptr) return Status::Unavailable("{}: ibv_create_cq({}): {}", d.name, cqe, std::strerror(errno));
  beat_.assign(8, std::byte{0});
  beat_mr_ = ibv_reg_mr(d.pd, beat_.data(), beat_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (beat_mr_ == nullptr) {
    ibv_destroy_cq(cq);
    return Status::Unavailable("{}: ibv_reg_mr (heartbeat word): {}", d.name, std::strerror(errno));
  }
  ibv_req_notify_cq(cq, 0);
  cq_.store(cq, std::memory_order_release);
  return {};
}

Hello VerbsEndpoint::hello(Hello::Kind kind, const QueuePair& q,
                           const std::vector<std::unique_ptr<QueuePair>>& lanes) const {
  Device& d = transport_->device();
  Hello h;
  h.kind = kind;
  h.ctx_id = transport_->ctx_id();
  h.rank = transport_->rank();
  h.qpn = q.qpn();
  h.psn = q.psn();
  h.mtu = static_cast<uint32_t>(d.port_attr.active_mtu);
  std::memcpy(h.gid, d.gid.raw, 16);
  h.recv_depth = static_cast<uint32_t>(q.shape().recv_depth);
  h.recv_size = q.shape().recv_size;
  h.beat_addr = reinterpret_cast<uint64_t>(beat_.data());
  h.beat_rkey = beat_mr_->rkey;
  h.max_rd_atom = static_cast<uint32_t>(d.max_rd_atom);
  h.lanes = static_cast<uint32_t>(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i) {
    h.lane_qpn[i] = lanes[i]->qpn();
    h.lane_psn[i] = lanes[i]->psn();
  }
  return h;
}

// A data lane carries RDMA WRITE/READ only: no messages, so one receive buffer (never used)
// and one send slot (QueuePair wants a non-empty slab).
Status VerbsEndpoint::create_lanes(std::vector<std::unique_ptr<QueuePair>>& lanes, size_t n) {
  QpShape s;
  s.sq_depth = transport_->options().sq_depth;
  s.signal_every = transport_->options().signal_every;
  s.recv_depth = 1;
  s.recv_size = 64;
  s.send_slots = 1;
  s.slot_size = 64;
  lanes.clear();
  for (size_t i = 0; i < n; ++i) {
    PODNET_ASSIGN_OR_RETURN(auto q, QueuePair::create(transport_->device(), cq(), s));
    lanes.push_back(std::move(q));
  }
  return {};
}

// Lane i connects to the peer's lane i: the peer's hello with that lane's QP number and PSN.
Status VerbsEndpoint::connect_lanes(std::vector<std::unique_ptr<QueuePair>>& lanes, const Hello& peer) {
  for (size_t i = 0; i < lanes.size(); ++i) {
    Hello lane = peer;
    lane.qpn = peer.lane_qpn[i];
    lane.psn = peer.lane_psn[i];
    PODNET_RETURN_IF_ERROR(lanes[i]->connect(lane, transport_->options()));
  }
  return {};
}

size_t VerbsEndpoint::stripe(size_t len, size_t qps) const {
  const size_t chunk = transport_->chunk();
  if (qps <= 1 || len < kStripeMin) return chunk;
  size_t per = (len + qps - 1) / qps;
  per = (per + 4095) & ~size_t{4095};
  return std::min(chunk, per);
}

size_t VerbsEndpoint::pick_lane(size_t len, size_t posted, size_t piece, size_t qps, int& lane, size_t& next) {
  if (qps <= 1) return 0;
  if (len >= kStripeMin) return (posted / piece) % qps;
  if (lane < 0) lane = static_cast<int>(next++ % qps);
  return static_cast<size_t>(lane);
}

VerbsEndpoint::QpRef VerbsEndpoint::find_qp(uint32_t qpn) const {
  if (req_qp_ && req_qp_->qpn() == qpn) return {req_qp_.get(), true, 0};
  if (serve_qp_ && serve_qp_->qpn() == qpn) return {serve_qp_.get(), false, 0};
  for (size_t i = 0; i < req_lanes_.size(); ++i)
    if (req_lanes_[i]->qpn() == qpn) return {req_lanes_[i].get(), true, static_cast<int>(i) + 1};
  for (size_t i = 0; i < serve_lanes_.size(); ++i)
    if (serve_lanes_[i]->qpn() == qpn) return {serve_lanes_[i].get(), false, static_cast<int>(i) + 1};
  return {};
}

QpShape VerbsEndpoint::shape(bool request_qp) const {
  const auto& o = transport_->options();
  QpShape s;
  s.sq_depth = o.sq_depth;
  s.signal_every = o.signal_every;
  s.inline_bytes = static_cast<uint32_t>(o.inline_bytes);
  if (request_qp) {
    s.recv_depth = 2 * o.recv_depth + 16;  // replies: one per request at most, plus credits and revokes
    s.recv_size = sizeof(Msg);
    s.send_slots = o.recv_depth;  // messages in flight are bounded by credits anyway
    s.slot_size = static_cast<uint32_t>(sizeof(Msg) + o.eager_max);
  } else {
    s.recv_depth = o.recv_depth;
    s.recv_size = static_cast<uint32_t>(sizeof(Msg) + o.eager_max);
    s.send_slots = o.sq_depth;
    s.slot_size = sizeof(Msg);
  }
  return s;
}

Result<Hello> VerbsEndpoint::start_request_qp() {
  std::lock_guard lk(mu_);
  if (req_qp_) return Status::Cancelled("already connecting");
  if (!failed_.ok()) return failed_;
  PODNET_RETURN_IF_ERROR(ensure_cq());
  PODNET_ASSIGN_OR_RETURN(req_qp_, QueuePair::create(transport_->device(), cq(), shape(true)));
  PODNET_RETURN_IF_ERROR(create_lanes(req_lanes_, static_cast<size_t>(transport_->options().qps - 1)));
  created_ns_ = now_ns();
  return hello(Hello::kHello, *req_qp_, req_lanes_);
}

bool VerbsEndpoint::request_started() const {
  std::lock_guard lk(mu_);
  return req_qp_ != nullptr;
}

Status VerbsEndpoint::on_reply(const Hello& reply) {
  Done done;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok() || !req_qp_) return failed_;
    Status st = req_qp_->connect(reply, transport_->options());
    if (st.ok() && reply.lanes > req_lanes_.size())
      st = Status::Protocol("the peer accepted {} data lanes, {} were offered", reply.lanes, req_lanes_.size());
    if (st.ok()) {
      req_lanes_.resize(reply.lanes);  // the peer's PODNET_VERBS_QPS may be smaller
      st = connect_lanes(req_lanes_, reply);
    }
    if (!st.ok()) {
      fail_locked(Status::PeerFailed("connecting the queue pair: {}", st.message()), done);
    } else {
      peer_req_ = reply;
      credits_ = static_cast<int>(reply.recv_depth);
      connected_ = true;
      quiet_since_ns_ = now_ns();
      ibv_gid g;
      std::memcpy(g.raw, reply.gid, 16);
      Device& d = transport_->device();
      PODNET_INFO(kNet, "verbs: {} connected: {} port {} GID {} ({}) -> GID {}, MTU {}, QP {:#x} -> {:#x}, inline {} B, {} QPs",
                  peer_name(), d.name, d.port, d.gid_index, gid_text(d.gid), gid_text(g),
                  mtu_bytes(req_qp_->path_mtu()), req_qp_->qpn(), reply.qpn, req_qp_->max_inline(),
                  1 + req_lanes_.size());
      pump(done);
    }
  }
  finish(done);
  return health();
}

Result<Hello> VerbsEndpoint::accept_serve_qp(const Hello& h) {
  std::lock_guard lk(mu_);
  if (!failed_.ok()) return failed_;
  if (serve_qp_) return Status::Protocol("{} connected twice", peer_name());
  PODNET_RETURN_IF_ERROR(ensure_cq());
  PODNET_ASSIGN_OR_RETURN(serve_qp_, QueuePair::create(transport_->device(), cq(), shape(false)));
  PODNET_RETURN_IF_ERROR(serve_qp_->connect(h, transport_->options()));
  const auto lanes = std::min<size_t>(h.lanes, static_cast<size_t>(transport_->options().qps - 1));
  PODNET_RETURN_IF_ERROR(create_lanes(serve_lanes_, lanes));
  PODNET_RETURN_IF_ERROR(connect_lanes(serve_lanes_, h));
  peer_serve_ = h;
  return hello(Hello::kReply, *serve_qp_, serve_lanes_);
}

std::shared_ptr<detail::RequestState> VerbsEndpoint::new_request(const char* op) {
  return detail::make_request(&transport_->engine(), op, next_seq_.fetch_add(1, std::memory_order_relaxed));
}

Status VerbsEndpoint::op_error(const detail::RequestState& r, const Status& why) const {
  return Status(why.code(), fmt::format("{} seq {} to {}: {}", r.op(), r.seq(), peer_name(), why.message()));
}

VerbsEndpoint::Req VerbsEndpoint::failed_request(const char* op, const Status& why) {
  auto r = new_request(op);
  r->complete(op_error(*r, why));
  return r;
}

void VerbsEndpoint::enqueue(Pending p) {
  Done done;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) {
      done.reqs.emplace_back(p.req, op_error(*p.req, failed_));
    } else if (connected_ && pending_.empty()) {
      // Nothing queued ahead (post order is kept): posted now, without a trip through the
      // FIFO; what does not fit waits there as usual.
      if (!post_pending(p, done)) pending_.push_back(std::move(p));
      settle(done);
    } else {
      pending_.push_back(std::move(p));
      pump(done);
    }
  }
  finish(done);
}

VerbsEndpoint::Req VerbsEndpoint::write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                        uint64_t remote_off, size_t len, const uint64_t* imm) {
  const char* op = imm ? "write_notify" : "write";
  auto mr = transport_->mrs().get(local);
  if (!mr.ok()) return failed_request(op, mr.status().with_context("local region"));
  Pending p;
  p.kind = Kind::kWrite;
  p.req = new_request(op);
  p.laddr = local.base + local_off;
  p.lkey = *mr ? (*mr)->lkey : 0;
  p.key = remote.key;
  p.raddr = remote.addr + remote_off;
  p.len = len;
  p.notify = imm != nullptr;
  p.imm = imm ? *imm : 0;
  auto r = p.req;
  r->bytes = len;
  enqueue(std::move(p));
  return r;
}

VerbsEndpoint::Req VerbsEndpoint::read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote,
                                       uint64_t remote_off, size_t len) {
  auto mr = transport_->mrs().get(local);
  if (!mr.ok()) return failed_request("read", mr.status().with_context("local region"));
  Pending p;
  p.kind = Kind::kRead;
  p.req = new_request("read");
  p.laddr = local.base + local_off;
  p.lkey = *mr ? (*mr)->lkey : 0;
  p.key = remote.key;
  p.raddr = remote.addr + remote_off;
  p.len = len;
  auto r = p.req;
  r->bytes = len;
  enqueue(std::move(p));
  return r;
}

VerbsEndpoint::Req VerbsEndpoint::send(const void* buf, size_t len, uint64_t tag) {
  auto r = new_request("send");
  r->bytes = len;
  if (len <= transport_->options().eager_max) {
    Msg m;
    m.type = MsgType::kEager;
    m.tag = tag;
    m.len = static_cast<uint32_t>(len);
    Done done;
    {
      std::lock_guard lk(mu_);
      if (!failed_.ok()) {
        done.reqs.emplace_back(r, op_error(*r, failed_));
      } else if (!(connected_ && pending_.empty() && post_message(m, buf, len))) {
        Pending p;  // no room now: keep a copy, the caller's buffer is free when we return
        p.kind = Kind::kEager;
        p.req = r;
        p.tag = tag;
        p.payload.assign(static_cast<const std::byte*>(buf), static_cast<const std::byte*>(buf) + len);
        pending_.push_back(std::move(p));
        pump(done);
      }
    }
    finish(done);
    r->complete(Status::Ok());  // the payload was copied; ignored when an error completed it first
    return r;
  }
  auto mr = transport_->mrs().register_buffer(buf, len, IBV_ACCESS_REMOTE_READ);
  if (!mr.ok()) {
    r->complete(op_error(*r, mr.status()));
    return r;
  }
  Pending p;
  p.kind = Kind::kRts;
  p.req = r;
  p.tag = tag;
  p.mr = *mr;
  p.len = len;
  enqueue(std::move(p));
  return r;
}

VerbsEndpoint::Req VerbsEndpoint::recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) {
  auto r = new_request("recv");
  detail::PostedRecv pr{static_cast<std::byte*>(buf), capacity, tag, mask, r};
  auto msg = matcher_.post(pr);
  if (!msg) return r;
  if (!msg->rendezvous) {
    detail::deliver_eager(pr, msg->data.data(), msg->length, msg->tag);
    return r;
  }
  Done done;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) {
      done.reqs.emplace_back(r, op_error(*r, failed_));
    } else {
      start_pull(std::move(pr), msg->rdv_id, done);
      pump(done);
    }
  }
  finish(done);
  return r;
}

VerbsEndpoint::Req VerbsEndpoint::recv_notify() {
  auto r = new_request("recv_notify");
  matcher_.post_notify(r);
  return r;
}

Status VerbsEndpoint::health() const {
  std::lock_guard lk(mu_);
  return failed_;
}

void VerbsEndpoint::finish(Done& done) {
  done.reqs.for_each([](std::pair<Req, Status>& p) { p.first->complete(p.second); });
  done.reqs.clear();
  if (!done.matcher_failure.ok()) matcher_.fail(done.matcher_failure);
}

// ---- what pump() posts (mu_ held) -------------------------------------------------------

bool VerbsEndpoint::post_message(const Msg& m, const void* payload, size_t len) {
  if (credits_ <= 0) return false;
  if (!post_slot(*req_qp_, m, payload, len, "ibv_post_send")) return false;
  --credits_;
  ++posts_;
  return true;
}

bool VerbsEndpoint::post_reply(Msg m) {
  m.credits = static_cast<uint16_t>(std::min(credits_owed_, 0xFFFF));
  if (!post_slot(*serve_qp_, m, nullptr, 0, "ibv_post_send (reply)")) return false;
  credits_owed_ -= m.credits;
  return true;
}

// Copies the message (and payload) into a free send slot of q and posts it as a SEND.
bool VerbsEndpoint::post_slot(QueuePair& q, const Msg& m, const void* payload, size_t len, const char* what) {
  if (q.sq.full()) return false;
  if (sizeof m + len <= q.max_inline()) {
    // Small: inline from the stack, mostly unsignaled (no slot to give back, no completion
    // to reap per message). Measured in the lab: docs/verbs.md.
    alignas(8) std::byte buf[kMaxInline];
    std::memcpy(buf, &m, sizeof m);
    if (len > 0) std::memcpy(buf + sizeof m, payload, len);
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(sizeof m + len), 0};
    ibv_send_wr wr{};
    const bool signaled = q.sq.want_signal();
    wr.wr_id = make_wr_id(WrKind::kInline, 0, 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0);
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(q.qp(), &wr, &bad)) {
      post_failed_ = Status::PeerFailed("{}: {}", what, std::strerror(rc));
      return false;
    }
    q.sq.posted(signaled);
    return true;
  }
  int slot = q.take_slot();
  if (slot < 0) return false;
  std::byte* p = q.slot(slot);
  std::memcpy(p, &m, sizeof m);
  if (len > 0) std::memcpy(p + sizeof m, payload, len);
  ibv_sge sge{reinterpret_cast<uint64_t>(p), static_cast<uint32_t>(sizeof m + len), q.slot_lkey()};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::kSlot, static_cast<uint64_t>(slot), 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(q.qp(), &wr, &bad)) {
    q.give_slot(slot);
    post_failed_ = Status::PeerFailed("{}: {}", what, std::strerror(rc));
    return false;
  }
  q.sq.posted(true);
  return true;
}

bool VerbsEndpoint::post_rdma(QueuePair& q, ibv_wr_opcode opcode, uint64_t wr_id, std::byte* laddr, uint32_t lkey,
                              size_t len, uint64_t raddr, uint32_t rkey, uint32_t imm_be, bool may_skip_signal) {
  ibv_sge sge{reinterpret_cast<uint64_t>(laddr), static_cast<uint32_t>(len), lkey};
  ibv_send_wr wr{};
  const bool signaled = !may_skip_signal || q.sq.want_signal_rdma();
  wr.wr_id = wr_id;
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = opcode;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  // A small write goes inline, as perftest's: the payload travels in the work request, so the
  // device does not fetch it through the local key.
  if (opcode != IBV_WR_RDMA_READ && len > 0 && len <= q.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  wr.imm_data = imm_be;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(q.qp(), &wr, &bad)) {
    post_failed_ = Status::PeerFailed("ibv_post_send: {}", std::strerror(rc));
    return false;
  }
  q.sq.posted(signaled, signaled ? 0 : wr_id);
  ++posts_;
  return true;
}

bool VerbsEndpoint::needs_flush() const {
  if (!connected_ || !req_qp_) return false;
  if (req_qp_->sq.needs_flush()) return true;
  for (const auto& q : req_lanes_)
    if (q->sq.needs_flush()) return true;
  return false;
}

// Unsignaled chunks with no signaled work request behind them (send_queue.h): an empty RDMA
// write, signaled, retires them (the peer's heartbeat word is named, though it needs none).
void VerbsEndpoint::post_empty_write(QueuePair& q) {
  post_rdma(q, IBV_WR_RDMA_WRITE, make_wr_id(WrKind::kBeat, 0, 0), nullptr, 0, 0, peer_req_.beat_addr,
            peer_req_.beat_rkey, 0);
}

void VerbsEndpoint::flush_unsignaled() {
  auto flush = [&](QueuePair& q) {
    if (q.sq.needs_flush() && !q.sq.full()) post_empty_write(q);
  };
  if (!connected_ || !failed_.ok()) return;  // a failed endpoint's QPs are in the error state
  flush(*req_qp_);
  for (auto& q : req_lanes_) flush(*q);
}

bool VerbsEndpoint::quiet_for_close() {
  poll();
  Done done;
  bool quiet = false;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) return true;
    // Not connected yet: what is queued waits for the queue pairs (bounded by the caller).
    if (!connected_ || !req_qp_) return pending_.empty();
    pump(done);
    auto retired = [&](QueuePair& q) {
      if (q.sq.used() == 0) return true;
      if (q.sq.unsignaled_only() && !q.sq.full()) post_empty_write(q);
      return false;
    };
    quiet = pending_.empty();
    quiet = retired(*req_qp_) && quiet;
    for (auto& q : req_lanes_) quiet = retired(*q) && quiet;
    settle(done);
  }
  finish(done);
  return quiet;
}

void VerbsEndpoint::pump(Done& done) {
  // Nothing queued and nothing to flush (most calls, e.g. after every completion): done.
  if (replies_.empty() && pulls_.empty() && pending_.empty() && post_failed_.ok() && !needs_flush()) return;
  if (serve_qp_) {
    while (!replies_.empty() && post_reply(replies_.front())) replies_.pop_front();
    pump_pulls();
  }
  while (connected_ && !pending_.empty() && post_pending(pending_.front(), done)) pending_.pop_front();
  settle(done);
}

bool VerbsEndpoint::post_pending(Pending& p, Done& done) {
  if (p.kind == Kind::kWrite || p.kind == Kind::kRead) return pump_one_sided(p, done);
  Msg m;
  m.tag = p.tag;
  if (p.kind == Kind::kEager) {
    m.type = MsgType::kEager;
    m.len = static_cast<uint32_t>(p.payload.size());
    return post_message(m, p.payload.data(), p.payload.size());
  }
  m.type = MsgType::kRts;
  m.id = next_rdv_++;
  m.addr = reinterpret_cast<uint64_t>(p.mr->addr);
  m.size = p.len;
  m.rkey = p.mr->rkey;
  if (!post_message(m, nullptr, 0)) {
    --next_rdv_;
    return false;
  }
  sends_[m.id] = SendWait{p.req, p.mr};
  return true;
}

void VerbsEndpoint::settle(Done& done) {
  flush_unsignaled();
  if (!post_failed_.ok()) {
    Status st = post_failed_;
    post_failed_ = {};
    fail_locked(st, done);
  }
}

// Returns true when `p` is done with (posted in full, or refused).
bool VerbsEndpoint::pump_one_sided(Pending& p, Done& done) {
  KeyInfo& k = keys_[p.key];
  if (!k.resolved) {
    if (!k.asked) {
      Msg m;
      m.type = MsgType::kResolve;
      m.tag = p.key;
      if (post_message(m, nullptr, 0)) k.asked = true;
    }
    return false;  // the FIFO waits for the answer (one round trip per key and peer)
  }
  if (p.op_id == 0) {
    Access need = p.kind == Kind::kRead ? Access::kRemoteRead : Access::kRemoteWrite;
    // The target's own answer about its region: the same check (and words) as tcp/shm.
    Status st = detail::check_remote_range(p.key, k.base, k.length, k.access, p.raddr, p.len, need);
    if (!st.ok() && transport_->options().check) {
      done.reqs.emplace_back(p.req, op_error(*p.req, st));
      return true;
    }
    if (p.len == 0 && !p.notify) {
      done.reqs.emplace_back(p.req, Status::Ok());
      return true;
    }
    auto [id, fresh] = ops_.emplace();
    fresh.req = p.req;
    p.op_id = id;
  }
  Op& op = *ops_.find(p.op_id);
  const size_t qps = 1 + req_lanes_.size();
  const size_t piece = stripe(p.len, qps);
  const bool imm32 = p.imm <= 0xFFFFFFFFull;
  if (p.notify && p.len < kStripeMin) p.lane = 0;  // a small write_notify stays on the main QP
  while (!p.data_posted) {
    size_t n = std::min(piece, p.len - p.posted);
    bool last = p.posted + n == p.len;
    bool with_imm = last && p.notify && imm32;
    if (n == 0 && !with_imm) {  // an empty write_notify with a 64-bit immediate: only the message
      p.data_posted = true;
      break;
    }
    // Stripes round-robin over the QPs (a small transfer goes whole to the next QP); the
    // immediate rides the main QP after every stripe on a lane was acknowledged (RC orders
    // each QP alone).
    const size_t lane = with_imm ? 0 : pick_lane(p.len, p.posted, piece, qps, p.lane, next_lane_);
    QueuePair& q = lane == 0 ? *req_qp_ : *req_lanes_[lane - 1];
    if (with_imm && op.lane_outstanding > 0) return false;
    if (q.sq.full() || (with_imm && credits_ <= 0)) return false;
    ibv_wr_opcode opc = p.kind == Kind::kRead ? IBV_WR_RDMA_READ
                        : with_imm            ? IBV_WR_RDMA_WRITE_WITH_IMM
                                              : IBV_WR_RDMA_WRITE;
    // Plain chunks may go unsignaled (a later completion retires them); an immediate is
    // signaled, it completes the caller's notification.
    uint64_t wr_id = make_wr_id(WrKind::kChunk, 0, p.op_id);
    if (!post_rdma(q, opc, wr_id, p.laddr + p.posted, p.lkey, n, p.raddr + p.posted, k.rkey,
                   htonl(static_cast<uint32_t>(p.imm)), !with_imm))
      return true;  // pump() fails the endpoint
    if (with_imm) --credits_;
    ++op.outstanding;
    if (lane > 0) ++op.lane_outstanding;
    p.posted += n;
    p.data_posted = last;
  }
  if (p.notify && !imm32) {
    if (op.lane_outstanding > 0) return false;  // as above: every stripe placed first
    // RC keeps order: the message arrives after the data it follows is placed.
    Msg m;
    m.type = MsgType::kNotify;
    m.tag = p.imm;
    if (!post_message(m, nullptr, 0)) return false;  // retried later; the data part is posted
  }
  op.all_posted = true;
  if (op.outstanding == 0) {
    done.reqs.emplace_back(op.req, Status::Ok());
    ops_.erase(p.op_id);
  }
  return true;
}

}  // namespace podnet::verbs
