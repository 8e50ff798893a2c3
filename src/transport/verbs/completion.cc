// VerbsEndpoint: the completion side (work completions, incoming messages, rendezvous pulls),
// failure, liveness and tear-down.
#include <arpa/inet.h>

#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "transport/request.h"
#include "transport/verbs/endpoint.h"
#include "transport/verbs/transport.h"

namespace podnet::verbs {

int VerbsEndpoint::poll() {
  ibv_cq* cq = cq_.load(std::memory_order_acquire);
  if (cq == nullptr) return 0;
  // One thread drains at a time: completions of one QP must be handled in order.
  std::unique_lock pl(poll_mu_, std::try_to_lock);
  if (!pl.owns_lock()) return 0;
  return poll_locked(cq);
}

void VerbsEndpoint::drain_departed() {
  ibv_cq* cq = cq_.load(std::memory_order_acquire);
  if (cq == nullptr) return;
  std::lock_guard pl(poll_mu_);  // waits for a thread polling now: it may stop at a burst
  poll_locked(cq);
}

int VerbsEndpoint::poll_locked(ibv_cq* cq) {
  if (repost_count_.load(std::memory_order_relaxed) != 0) {
    Done done;
    {
      std::lock_guard lk(mu_);
      repost(done);
      owe_credits();
      pump(done);  // a peer out of credits waits for these (and may send nothing until then)
    }
    finish(done);
  }
  int total = 0;
  for (;;) {
    ibv_wc wc[32];
    int n = ibv_poll_cq(cq, 32, wc);
    if (n <= 0) break;
    total += n;
    Done done;
    {
      std::lock_guard lk(mu_);
      for (int i = 0; i < n; ++i) handle(wc[i], done);
      // A burst goes back at once: few buffers may wait for the next poll (a reply QP's
      // buffers are not covered by credits; a peer finding none would back off for an RNR).
      if (reposts_.size() >= kRepostLater) repost(done);
      owe_credits();
      pump(done);
    }
    finish(done);
    if (n < 32) break;
  }
  return total;
}

// The receive buffers whose messages were handled go back to their queues, then the credits
// for the serve QP's ones are owed to the peer (never before: it would send into a buffer not
// yet posted). With mu_ held.
void VerbsEndpoint::repost(Done& done) {
  if (reposts_.empty()) return;
  if (failed_.ok()) {
    for (auto [q, slot] : reposts_) {
      if (Status st = q->post_recv(slot); !st.ok()) {
        fail_locked(st, done);
        break;
      }
      if (q == serve_qp_.get()) ++credits_owed_;
    }
  }
  reposts_.clear();
  repost_count_.store(0, std::memory_order_relaxed);
}

// Enough credits owed and no reply to carry them: a kCredit message of their own.
void VerbsEndpoint::owe_credits() {
  if (serve_qp_ && credits_owed_ >= std::max(1, serve_qp_->shape().recv_depth / 4) && replies_.empty()) {
    Msg m;
    m.type = MsgType::kCredit;
    replies_.push_back(m);
  }
}

bool VerbsEndpoint::arm() {
  ibv_cq* cq = cq_.load(std::memory_order_acquire);
  if (cq == nullptr) return true;
  ibv_req_notify_cq(cq, 0);
  return poll() == 0;  // a completion that raced the arming is handled now
}

std::string VerbsEndpoint::wc_error(const ibv_wc& wc, const char* what) const {
  Device& d = transport_->device();
  const QpRef ref = find_qp(wc.qp_num);
  const Hello& peer = ref.on_req ? peer_req_ : peer_serve_;
  ibv_gid g;
  std::memcpy(g.raw, peer.gid, 16);
  const uint32_t qpn = ref.lane > 0 ? peer.lane_qpn[ref.lane - 1] : peer.qpn;
  return fmt::format("{}: {} (local {} port {} GID {}, remote GID {} QP {:#x}{})", what,
                     wc_status_words(wc.status, transport_->retry_budget_ms()), d.name, d.port, gid_text(d.gid),
                     gid_text(g), qpn, ref.lane > 0 ? fmt::format(", data lane {}", ref.lane) : std::string());
}

void VerbsEndpoint::handle(const ibv_wc& wc, Done& done) {
  const QpRef ref = find_qp(wc.qp_num);
  const bool on_req = ref.on_req;
  QueuePair* q = ref.qp;
  if (q == nullptr) return;
  const WrKind kind = wr_kind(wc.wr_id);
  if (kind != WrKind::kRecv) {
    retired_.clear();
    q->sq.completed(retired_);
    if (kind == WrKind::kSlot) q->give_slot(static_cast<int>(wr_slot(wc.wr_id)));
    // Unsignaled chunks before this one completed first (RC completes in order); on an error
    // the endpoint fails below, and every operation with it.
    if (wc.status == IBV_WC_SUCCESS)
      for (uint64_t id : retired_) chunk_done(id, ref.lane, done);
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) return;  // the QP failed earlier; that error was reported
    const char* what = kind == WrKind::kBeat ? "heartbeat" : kind == WrKind::kRecv ? "receive" : "operation";
    Status st = Status::PeerFailed("{}", wc_error(wc, what));
    if (kind == WrKind::kChunk || kind == WrKind::kPull) {
      if (Op* op = ops_.find(wr_op(wc.wr_id)); op != nullptr && op->req) {
        Code code = wc.status == IBV_WC_REM_ACCESS_ERR ? Code::kAccessDenied : Code::kPeerFailed;
        done.reqs.emplace_back(op->req, op_error(*op->req, Status(code, st.message())));
      }
    }
    fail_locked(st, done);
    return;
  }
  switch (kind) {
    case WrKind::kRecv: {
      if (ref.lane > 0)
        return fail_locked(Status::Protocol("from {}: a message on data lane {}", peer_name(), ref.lane), done);
      const uint32_t slot = wr_slot(wc.wr_id);
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint64_t imm = ntohl(wc.imm_data);
        if (auto r = matcher_.notify_incoming(imm)) done.reqs.emplace_back(std::move(r), Status::Ok());
      } else {
        auto m = decode_msg(q->recv_buffer(slot), wc.byte_len, !on_req);
        if (!m.ok()) {
          fail_locked(Status::Protocol("from {}: {}", peer_name(), m.status().message()), done);
          return;
        }
        if (on_req) on_reply_msg(*m, done);
        else on_request_msg(*m, q->recv_buffer(slot) + sizeof(Msg), done);
      }
      // Re-posted at the next poll(), off the path from this completion to its waiter.
      reposts_.push_back({q, slot});
      repost_count_.store(static_cast<uint32_t>(reposts_.size()), std::memory_order_relaxed);
      return;
    }
    case WrKind::kChunk:
    case WrKind::kPull:
      return chunk_done(wc.wr_id, ref.lane, done);
    default:
      return;  // kSlot, kInline, kBeat: accounted above
  }
}

void VerbsEndpoint::chunk_done(uint64_t wr_id, int lane, Done& done) {
  const uint64_t id = wr_op(wr_id);
  Op* found = ops_.find(id);
  if (found == nullptr) return;  // failed earlier
  Op& op = *found;
  if (lane > 0) --op.lane_outstanding;
  if (--op.outstanding > 0 || !op.all_posted) return;
  if (op.pull) {
    ibv_dereg_mr(op.mr);
    op.recv.req->bytes = op.len;
    op.recv.req->tag = op.tag;
    done.reqs.emplace_back(op.recv.req, Status::Ok());
    Msg fin;
    fin.type = MsgType::kFin;
    fin.id = op.rdv_id;
    replies_.push_back(fin);
  } else {
    done.reqs.emplace_back(std::move(op.req), Status::Ok());
  }
  ops_.erase(id);
}

void VerbsEndpoint::on_request_msg(const Msg& m, const std::byte* payload, Done& done) {
  switch (m.type) {
    case MsgType::kEager: {
      auto posted = matcher_.match_or_queue(m.tag, [&] {
        auto u = detail::make_unexpected();
        u->tag = m.tag;
        u->length = m.len;
        u->data.assign(payload, payload + m.len);
        u->complete = true;
        return u;
      });
      if (!posted) return;
      if (m.len > posted->capacity) {
        done.reqs.emplace_back(posted->req, Status::InvalidArgument(
                                                "{} seq {}: message of {} bytes (tag {}) exceeds the receive buffer "
                                                "of {} bytes",
                                                posted->req->op(), posted->req->seq(), m.len, m.tag, posted->capacity));
        return;
      }
      if (m.len > 0) std::memcpy(posted->buf, payload, m.len);
      posted->req->bytes = m.len;
      posted->req->tag = m.tag;
      done.reqs.emplace_back(std::move(posted->req), Status::Ok());
      return;
    }
    case MsgType::kRts: {
      rts_[m.id] = RtsInfo{m.tag, m.addr, m.rkey, m.size};
      auto posted = matcher_.match_or_queue(m.tag, [&] {
        auto u = detail::make_unexpected();
        u->tag = m.tag;
        u->length = m.size;
        u->rendezvous = true;
        u->rdv_id = m.id;
        return u;
      });
      if (posted) start_pull(std::move(*posted), m.id, done);
      return;
    }
    case MsgType::kResolve: {
      Msg r;
      r.type = MsgType::kResolveReply;
      r.tag = m.tag;
      auto region = transport_->registry().find(m.tag);
      if (!region) {
        r.status = 1;
      } else if (auto mr = transport_->mrs().get(*region); !mr.ok()) {
        PODNET_WARN(kNet, "verbs: {} asked for key {:#x}: {}", peer_name(), m.tag, mr.status().message());
        r.status = 2;
      } else {
        r.addr = reinterpret_cast<uint64_t>(region->base);
        r.size = region->length;
        r.access = static_cast<uint32_t>(region->access);
        r.rkey = *mr ? (*mr)->rkey : 0;
        served_keys_.push_back(m.tag);
      }
      replies_.push_back(r);
      return;
    }
    case MsgType::kNotify:
      if (auto r = matcher_.notify_incoming(m.tag)) done.reqs.emplace_back(std::move(r), Status::Ok());
      return;
    default:
      return;  // decode_msg() lets only requests through here
  }
}

void VerbsEndpoint::on_reply_msg(const Msg& m, Done& done) {
  credits_ += m.credits;
  switch (m.type) {
    case MsgType::kFin: {
      auto it = sends_.find(m.id);
      if (it == sends_.end()) return;
      ibv_dereg_mr(it->second.mr);
      Status st = m.status == 0   ? Status::Ok()
                  : m.status == 1 ? Status::InvalidArgument("the receive buffer at the peer is smaller than the message")
                                  : Status::PeerFailed("the peer could not register its receive buffer");
      auto req = it->second.req;
      done.reqs.emplace_back(req, st.ok() ? st : op_error(*req, st));
      sends_.erase(it);
      return;
    }
    case MsgType::kResolveReply: {
      if (m.status != 0) {
        fail_key(m.tag,
                 m.status == 1 ? Status::AccessDenied("key {:#x} is not registered at the target (wrong key, or the "
                                                      "region was deregistered)",
                                                      m.tag)
                               : Status::Unavailable("the target could not register the region of key {:#x} with its "
                                                     "device (its log says why)",
                                                     m.tag),
                 done);
        return;
      }
      KeyInfo& k = keys_[m.tag];
      k.resolved = true;
      k.base = m.addr;
      k.length = m.size;
      k.rkey = m.rkey;
      k.access = static_cast<Access>(m.access);
      return;
    }
    case MsgType::kRevoke:
      keys_.erase(m.tag);
      return;
    default:
      return;  // kCredit
  }
}

// Operations on `key` that wait for it fail; a partly posted one fails too (its chunks in
// flight finish into nothing).
void VerbsEndpoint::fail_key(uint64_t key, const Status& why, Done& done) {
  keys_.erase(key);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if ((it->kind == Kind::kWrite || it->kind == Kind::kRead) && it->key == key) {
      done.reqs.emplace_back(it->req, op_error(*it->req, why));
      if (it->op_id != 0) ops_.erase(it->op_id);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void VerbsEndpoint::start_pull(detail::PostedRecv recv, uint64_t rdv_id, Done& done) {
  auto it = rts_.find(rdv_id);
  if (it == rts_.end()) return;
  RtsInfo info = it->second;
  rts_.erase(it);
  Msg fin;
  fin.type = MsgType::kFin;
  fin.id = rdv_id;
  if (info.len > recv.capacity) {
    done.reqs.emplace_back(recv.req, Status::InvalidArgument(
                                         "{} seq {}: message of {} bytes (tag {}) exceeds the receive buffer of {} "
                                         "bytes",
                                         recv.req->op(), recv.req->seq(), info.len, info.tag, recv.capacity));
    fin.status = 1;
    replies_.push_back(fin);
    return;
  }
  auto mr = transport_->mrs().register_buffer(recv.buf, info.len, IBV_ACCESS_LOCAL_WRITE);
  if (!mr.ok()) {
    done.reqs.emplace_back(recv.req, op_error(*recv.req, mr.status()));
    fin.status = 2;
    replies_.push_back(fin);
    return;
  }
  auto [id, op] = ops_.emplace();
  op.pull = true;
  op.mr = *mr;
  op.rdv_id = rdv_id;
  op.len = info.len;
  op.tag = info.tag;
  op.recv = std::move(recv);
  pulls_.push_back(PullWork{id, info.addr, info.rkey, op.recv.buf, (*mr)->lkey, info.len, 0});
}

void VerbsEndpoint::pump_pulls() {
  const size_t qps = 1 + serve_lanes_.size();
  while (!pulls_.empty()) {
    PullWork& w = pulls_.front();
    Op* op = ops_.find(w.op_id);
    if (op == nullptr) {
      pulls_.pop_front();
      continue;
    }
    const size_t piece = stripe(w.len, qps);
    while (w.posted < w.len) {
      const size_t lane = pick_lane(w.len, w.posted, piece, qps, w.lane, next_pull_lane_);
      QueuePair& q = lane == 0 ? *serve_qp_ : *serve_lanes_[lane - 1];
      if (q.sq.full()) return;
      size_t n = std::min(piece, w.len - w.posted);
      if (!post_rdma(q, IBV_WR_RDMA_READ, make_wr_id(WrKind::kPull, 0, w.op_id), w.laddr + w.posted, w.lkey, n,
                     w.raddr + w.posted, w.rkey, 0))
        return;
      ++op->outstanding;
      if (lane > 0) ++op->lane_outstanding;
      w.posted += n;
    }
    op->all_posted = true;
    pulls_.pop_front();
  }
}

void VerbsEndpoint::revoke(uint64_t key) {
  Done done;
  {
    std::lock_guard lk(mu_);
    auto it = std::find(served_keys_.begin(), served_keys_.end(), key);
    if (it == served_keys_.end() || !failed_.ok()) return;
    served_keys_.erase(it);
    Msg m;
    m.type = MsgType::kRevoke;
    m.tag = key;
    replies_.push_back(m);
    pump(done);
  }
  finish(done);
}

void VerbsEndpoint::fail(const Status& why, bool quiet) {
  poll();  // what the peer delivered before it went away still counts
  Done done;
  {
    std::lock_guard lk(mu_);
    fail_locked(why, done, quiet);
  }
  finish(done);
}

void VerbsEndpoint::fail_locked(const Status& why, Done& done, bool quiet) {
  if (!failed_.ok()) return;
  failed_ = why;
  if (quiet) PODNET_INFO(kNet, "verbs: {}: {}", peer_name(), why.message());
  else if (why.code() != Code::kCancelled) PODNET_WARN(kNet, "verbs: {} failed: {}", peer_name(), why.message());
  auto to_error = [](QueuePair* q) {
    if (q == nullptr) return;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;  // the device stops touching our buffers
    ibv_modify_qp(q->qp(), &a, IBV_QP_STATE);
  };
  to_error(req_qp_.get());
  to_error(serve_qp_.get());
  for (auto& q : req_lanes_) to_error(q.get());
  for (auto& q : serve_lanes_) to_error(q.get());
  for (auto& p : pending_) {
    if (p.kind == Kind::kRts && p.mr) ibv_dereg_mr(p.mr);
    done.reqs.emplace_back(p.req, op_error(*p.req, why));
  }
  pending_.clear();
  ops_.for_each([&](uint64_t, Op& op) {
    if (op.pull) {
      if (op.mr) ibv_dereg_mr(op.mr);
      done.reqs.emplace_back(op.recv.req, op_error(*op.recv.req, why));
    } else if (op.req) {
      done.reqs.emplace_back(op.req, op_error(*op.req, why));
    }
  });
  ops_.clear();
  pulls_.clear();
  reposts_.clear();  // the QPs are in the error state: nothing is posted any more
  repost_count_.store(0, std::memory_order_relaxed);
  for (auto& [id, s] : sends_) {
    ibv_dereg_mr(s.mr);
    done.reqs.emplace_back(s.req, op_error(*s.req, why));
  }
  sends_.clear();
  replies_.clear();
  done.matcher_failure = Status(why.code(), fmt::format("{}: {}", peer_name(), why.message()));
}

void VerbsEndpoint::tick(int64_t now) {
  Done done;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok() || !req_qp_) return;
    const auto& o = transport_->options();
    if (!connected_) {
      if (now - created_ns_ > int64_t{o.connect_timeout_ms} * 1000000)
        fail_locked(Status::PeerFailed("the queue pair was not connected within {} ms (PODNET_CONNECT_TIMEOUT_MS): "
                                       "is the peer's verbs setup port reachable?",
                                       o.connect_timeout_ms),
                    done);
    } else if (posts_ != posts_seen_) {  // busy since the last tick
      posts_seen_ = posts_;
      quiet_since_ns_ = now;
    } else if (now - quiet_since_ns_ > int64_t{o.heartbeat_ms} * 1000000 && !req_qp_->sq.full()) {
      // An RDMA write the peer's CPU never sees: a dead host or path becomes "retry exceeded".
      post_rdma(*req_qp_, IBV_WR_RDMA_WRITE, make_wr_id(WrKind::kBeat, 0, 0), beat_.data(), beat_mr_->lkey,
                beat_.size(), peer_req_.beat_addr, peer_req_.beat_rkey, 0);
      pump(done);
    }
  }
  finish(done);
}

void VerbsEndpoint::release_resources() {
  Done done;
  {
    std::lock_guard lk(mu_);
    fail_locked(Status::Cancelled("the local context is shutting down"), done);
  }
  finish(done);
  std::lock_guard pl(poll_mu_);
  std::lock_guard lk(mu_);
  req_lanes_.clear();
  serve_lanes_.clear();
  req_qp_.reset();
  serve_qp_.reset();
  if (beat_mr_) ibv_dereg_mr(beat_mr_);
  beat_mr_ = nullptr;
  if (ibv_cq* cq = cq_.exchange(nullptr)) ibv_destroy_cq(cq);
}

}  // namespace podnet::verbs
