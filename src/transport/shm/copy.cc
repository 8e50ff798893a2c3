// The target side of one-sided operations and the large-payload copies of shm: checks at the
// target, cross-memory copies, and the split copies that both sides share (endpoint.h).
#include "base/copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <vector>

#include "base/log.h"
#include "transport/shm/endpoint.h"
#include "transport/shm/transport.h"

namespace podnet::shm {
namespace {
std::atomic<uint64_t> g_split_pushes{0};
std::atomic<uint64_t> g_mapped_pushes{0};
}  // namespace

uint64_t ShmEndpoint::split_pushes() noexcept { return g_split_pushes.load(std::memory_order_relaxed); }
uint64_t ShmEndpoint::mapped_pushes() noexcept { return g_mapped_pushes.load(std::memory_order_relaxed); }

void ShmEndpoint::pull_rendezvous(detail::PostedRecv recv, uint64_t seq, size_t len, uint64_t tag, bool split) {
  RtsSource from;
  {
    std::lock_guard lk(mu_);
    auto it = rts_src_.find(seq);
    if (it != rts_src_.end()) {
      from = it->second;
      rts_src_.erase(it);
    }
  }
  const uint64_t src = from.addr;
  RecHdr h{};
  h.seq = seq;
  // Not split once this side copies nothing with the peer's memory: no invitation to push
  // into a receive that is to fail (the copy below refuses, and the kFin says so).
  if (!peer_memory_closed().ok()) split = false;
  if (len > recv.capacity) {
    detail::deliver_eager(recv, nullptr, len, tag);  // completes with the size error
    reply(h, Rec::kFin, Status::InvalidArgument("the receiver's buffer ({} bytes) is smaller than the message ({} bytes)",
                                                recv.capacity, len), kLast);
    return;
  }
  recv.req->bytes = len;
  recv.req->tag = tag;
  if (from.ring) {
    // No cross-memory attach: the sender emits the payload through the ring into recv.buf.
    {
      std::lock_guard lk(mu_);
      ring_recvs_[seq] = RingRecv{recv.buf, len, recv.req};
    }
    if (Channel* ch = in_raw_.load(std::memory_order_acquire)) {
      OutOp op;
      op.hdr.type = Rec::kCts;
      op.hdr.flags = kRing;
      op.hdr.seq = seq;
      op.hdr.len = len;
      post(*ch, std::move(op));
    }
    return;
  }
  // The payload in a region of the sender's that this side mapped: one memcpy from the
  // mapping, all of it (a split's sender then pushes nothing).
  std::shared_ptr<detail::PeerMapping> mapped;
  if (from.region != 0) {
    if (Channel* out = out_raw_.load(std::memory_order_acquire)) mapped = mapping_for(*out, from.region);
    if (mapped && (mapped->revoked() || !detail::check_remote_range(from.region, mapped->data_addr(), mapped->length(),
                                                                     Access::kNone, src, len, Access::kNone)
                                             .ok()))
      mapped.reset();
  }
  size_t mine = len;
  // A receive buffer in memory this side allocated, which the peer may write: the sender can
  // copy its half through its mapping of it (kCts key), so a mapped pull is shared too.
  const uint64_t recv_key =
      split && mapped ? transport_->registry().allocated_key(recv.buf, len, Access::kRemoteWrite) : 0;
  if (split) {
    // The sender pushes [mine, len) while we pull [0, mine); after a mapped pull alone
    // (mine = len) it pushes nothing.
    if (!mapped || recv_key != 0) mine = (len / 2 + 4095) & ~size_t{4095};
    recv.req->set_parts(2);
    {
      std::lock_guard lk(mu_);
      split_recvs_[seq] = recv.req;
    }
    RecHdr cts{};
    cts.seq = seq;
    cts.key = recv_key;
    cts.addr = reinterpret_cast<uint64_t>(recv.buf);
    cts.len = len;
    cts.aux = mine;
    if (Channel* ch = in_raw_.load(std::memory_order_acquire)) {
      OutOp op;
      op.hdr = cts;
      op.hdr.type = Rec::kCts;
      post(*ch, std::move(op));
    }
  }
  Status st;
  {
    PeerCopy copy(*this);
    st = copy.status();
    if (st.ok() && mapped)
      copy_to_output(recv.buf, mapped->at(src), mine);
    else if (st.ok())
      st = cross_copy(peer_pid_.load(), recv.buf, src, mine, /*into_peer=*/false);
    // The answer goes out before the copy stops counting: a goodbye said once it does cannot
    // pass it, so the peer sees how its send ended. Completing (callbacks) comes after.
    reply(h, Rec::kFin, st, kLast);
  }
  if (split) recv.req->part_done(st.ok() ? st : op_failure(*recv.req, st));
  else
    recv.req->complete(st.ok() ? st : op_failure(*recv.req, st));
}

// Sender side of a split rendezvous: push our half into the receiver's buffer.
// Initiator side of a split copy: a send or write pushes [aux, len) into the peer's buffer at
// addr; a read pulls it from there. Then kPushDone tells the peer our half is in place.
void ShmEndpoint::on_cts(const RecHdr& h) {
  if (h.flags & kRing) {
    // A ring rendezvous: the receive is posted; the payload goes out as kRdvData fragments,
    // and the send completes once the last one is in the ring.
    std::optional<Op> taken = take_send(h.seq);
    if (!taken) return;
    Op& send = *taken;
    Channel* ch = out_raw_.load(std::memory_order_acquire);
    if (h.len != send.len || ch == nullptr) {
      send.req->complete(op_failure(
          *send.req, Status::Protocol("bad clear-to-send from the peer: {} bytes of a {}-byte send", h.len, send.len)));
      return;
    }
    OutOp op;
    op.hdr.type = Rec::kRdvData;
    op.hdr.seq = h.seq;
    op.hdr.len = send.len;
    op.src = send.dst;
    op.len = send.len;
    op.fragments = true;
    post(*ch, std::move(op), &send.req);
    return;
  }
  Op op;
  bool is_send = false;
  {
    std::lock_guard lk(mu_);
    auto it = sends_.find(h.seq);
    if (it != sends_.end()) {
      op = it->second;  // kFin erases it
      is_send = true;
    } else {
      auto o = ops_.find(h.seq);
      if (o == ops_.end()) return;
      op = o->second;  // kAck erases it
    }
  }
  Status st;
  std::optional<PeerCopy> copy;  // only when there is something to copy
  if (h.aux > h.len || h.len != op.len) {
    st = Status::Protocol("bad split from the peer: [{}, {}) of a {}-byte operation", h.aux, h.len, op.len);
  } else {
    // A region that the peer allocated and this side mapped (kCts key: a write's or read's
    // target region, a receive buffer): a memcpy; otherwise cross-memory attach.
    const size_t n = h.len - h.aux;
    if (n > 0 && (st = copy.emplace(*this).status()).ok()) {
      if (copy_mapped_now(h.key, h.addr + h.aux, op.dst + h.aux, n, op.read))
        g_mapped_pushes.fetch_add(1, std::memory_order_relaxed);
      else
        st = cross_copy(peer_pid_.load(), op.dst + h.aux, h.addr + h.aux, n, /*into_peer=*/!op.read);
      g_split_pushes.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // As in pull_rendezvous: the answer before the count, completing after it.
  if (Channel* ch = out_raw_.load(std::memory_order_acquire)) {
    OutOp done;
    done.hdr.type = Rec::kPushDone;
    done.hdr.seq = h.seq;
    done.hdr.code = static_cast<uint16_t>(st.code());
    if (!st.ok()) {
      done.owned = st.message().substr(0, 1024);
      done.len = done.owned.size();
    }
    post(*ch, std::move(done));
  }
  copy.reset();
  if (is_send) op.req->part_done(st.ok() ? st : op_failure(*op.req, st));
}

void ShmEndpoint::on_write(const RecHdr& h) {
  auto pin = transport_->registry().acquire(h.key, h.addr, h.len, Access::kRemoteWrite);
  if (pin.ok() && h.type == Rec::kWriteCma && (h.flags & kSplit)) return start_split(h, std::move(pin).value());
  Status st = pin.status();
  if (st.ok()) {
    auto* dst = reinterpret_cast<std::byte*>(h.addr);
    if (h.type == Rec::kWrite) {
      if (h.plen > 0 && h.aux + h.plen <= h.len) copy_part_to_output(dst + h.aux, payload(&h), h.plen, h.len);
    } else {
      PeerCopy copy(*this);
      if ((st = copy.status()).ok() && !copy_with_initiator(h, dst, h.len))
        st = cross_copy(peer_pid_.load(), dst, h.aux, h.len, /*into_peer=*/false);
    }
    pin->release();
  }
  bool last = h.type == Rec::kWriteCma || (h.flags & kLast);
  if (last && st.ok() && (h.flags & kNotify)) notify_in_order(h.imm);
  if (last || !st.ok()) reply(h, Rec::kAck, st, last ? kLast : 0);
}

void ShmEndpoint::on_read(const RecHdr& h) {
  auto pin = transport_->registry().acquire(h.key, h.addr, h.len, Access::kRemoteRead);
  if (!pin.ok()) {
    reply(h, Rec::kAck, pin.status(), kLast);
    return;
  }
  Channel* ch = in_raw_.load(std::memory_order_acquire);
  if (!ch) return;
  auto* src = reinterpret_cast<std::byte*>(h.addr);
  if (ch->cma() && (h.flags & kSplit)) return start_split(h, std::move(pin).value());
  if (ch->cma() && h.len > transport_->options().eager_max) {
    PeerCopy copy(*this);
    Status st = copy.status();
    if (st.ok() && !copy_with_initiator(h, src, h.len))
      st = cross_copy(peer_pid_.load(), src, h.aux, h.len, /*into_peer=*/true);
    pin->release();
    reply(h, Rec::kAck, st, kLast);  // before the count, as in pull_rendezvous
    return;
  }
  OutOp op;
  op.hdr.type = Rec::kReadData;
  op.hdr.seq = h.seq;
  op.hdr.len = h.len;
  op.src = src;
  op.len = h.len;
  op.fragments = true;
  op.keep = std::make_shared<detail::RegionPin>(std::move(pin).value());
  post(*ch, std::move(op));
}

void ShmEndpoint::start_split(const RecHdr& h, detail::RegionPin pin) {
  const bool read = h.type == Rec::kRead;
  const size_t half = (h.len / 2 + 4095) & ~size_t{4095};
  {
    std::lock_guard lk(mu_);
    SplitOp& op = split_ops_[h.seq];
    op.pin = std::make_shared<detail::RegionPin>(std::move(pin));
    op.hdr = h;
    if (!read) op.arrival = arrive_split();
  }
  // The initiator copies [half, len) of the region at h.addr (write: into it; read: out of it).
  if (Channel* ch = in_raw_.load(std::memory_order_acquire)) {
    OutOp cts;
    cts.hdr.type = Rec::kCts;
    cts.hdr.seq = h.seq;
    cts.hdr.key = h.key;  // the initiator may have mapped the region (allocated memory)
    cts.hdr.addr = h.addr;
    cts.hdr.len = h.len;
    cts.hdr.aux = half;
    post(*ch, std::move(cts));
  }
  auto* region = reinterpret_cast<std::byte*>(h.addr);
  const size_t mine = std::min<size_t>(half, h.len);
  Status st;
  {
    PeerCopy copy(*this);
    if ((st = copy.status()).ok() && !copy_with_initiator(h, region, mine))
      st = cross_copy(peer_pid_.load(), region, h.aux, mine, /*into_peer=*/read);
  }
  split_part_done(h.seq, st);
}

void ShmEndpoint::split_part_done(uint64_t seq, const Status& st) {
  SplitOp op;
  {
    std::lock_guard lk(mu_);
    auto it = split_ops_.find(seq);
    if (it == split_ops_.end()) return;
    if (!st.ok() && it->second.first_error.ok()) it->second.first_error = st;
    if (--it->second.parts > 0) return;
    op = std::move(it->second);
    split_ops_.erase(it);
  }
  op.pin.reset();  // both halves are copied: the region may be deregistered
  Status result = op.first_error;
  if (op.hdr.type != Rec::kRead)
    placed_split(op.arrival, result.ok() && (op.hdr.flags & kNotify) ? &op.hdr.imm : nullptr);
  reply(op.hdr, Rec::kAck, result, kLast);
}

// These run while the incoming channel is consumed (its records, kPushDone among them), one
// thread at a time (Channel::consume): the order queue needs no lock of its own.
uint64_t ShmEndpoint::arrive_split() {
  order_.push_back(Arrival{});
  return order_base_ + order_.size() - 1;
}

void ShmEndpoint::notify_in_order(uint64_t imm) {
  if (order_.empty()) {  // no split write in flight: the common case
    if (auto req = matcher_.notify_incoming(imm)) req->complete(Status::Ok());
    return;
  }
  order_.push_back(Arrival{true, true, imm});
}

void ShmEndpoint::placed_split(uint64_t arrival, const uint64_t* imm) {
  Arrival& a = order_[arrival - order_base_];
  a.placed = true;
  if (imm != nullptr) {
    a.notify = true;
    a.imm = *imm;
  }
  // In arrival order, every write now in place with nothing unplaced before it.
  std::vector<std::shared_ptr<detail::RequestState>> ready;
  for (; !order_.empty() && order_.front().placed; order_.pop_front(), ++order_base_) {
    if (!order_.front().notify) continue;
    if (auto req = matcher_.notify_incoming(order_.front().imm)) ready.push_back(std::move(req));
  }
  for (auto& r : ready) r->complete(Status::Ok());
}

}  // namespace podnet::shm
