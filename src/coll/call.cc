#include "coll/call.h"

#include <thread>

#include "base/clock.h"
#include "coll/comm_impl.h"
#include "coll/reduce_kernels.h"

namespace podnet::detail {
namespace {
constexpr uint64_t kCollBit = 1ull << 62;
constexpr int kCommShift = 45, kSeqShift = 31, kCollShift = 27, kTypeShift = 23, kOpShift = 20, kHashShift = 16;
constexpr uint64_t kSigMask = (0xFull << kCollShift) | (0xFull << kTypeShift) | (0x7ull << kOpShift) |
                              (0xFull << kHashShift);
// Masks for cancelling receives: one communicator's collectives (both top bits in the mask,
// so its abort listeners, which set both, stay out), and one call of it.
constexpr uint64_t kCommMask = (3ull << 62) | (0x1FFFFull << kCommShift);
constexpr uint64_t kCallMask = kCommMask | (0x3FFFull << kSeqShift);
// The tag bits every collective of communicator `id` carries.
uint64_t comm_prefix(uint32_t id) { return kCollBit | (static_cast<uint64_t>(id) & 0x1FFFF) << kCommShift; }
// Waits are sliced so that abort() is noticed promptly.
constexpr auto kSlice = std::chrono::milliseconds(100);
}  // namespace

Call::Call(CommImpl& comm, Collective coll, DataType t, ReduceOp op, size_t count, int root)
    : comm_(comm), coll_(coll), dtype_(t), op_(op), count_(count), root_(root), rank_(comm.rank()),
      size_(comm.size()), esize_(dtype_size(t)), seq_(coll == Collective::kSendRecv ? 0 : comm.next_seq()) {
  // Collectives number their calls 1..0x3FFF (wrapping); 0 is point-to-point's, so a call
  // after a wrap never matches a pending send/recv.
  const uint64_t seq_field = seq_ == 0 ? 0 : (seq_ - 1) % 0x3FFF + 1;
  tag_base_ = comm_prefix(comm_.id()) | seq_field << kSeqShift | signature();
}

uint64_t Call::signature() const {
  uint64_t h = (count_ * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(root_ + 1) * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 29;
  return (static_cast<uint64_t>(coll_) & 0xF) << kCollShift | (static_cast<uint64_t>(dtype_) & 0xF) << kTypeShift |
         (static_cast<uint64_t>(op_) & 0x7) << kOpShift | (h & 0xF) << kHashShift;
}

uint64_t Call::tag(uint32_t step) const { return tag_base_ | (step & 0xFFFF); }

std::string Call::describe_signature(uint64_t sig) const {
  auto c = static_cast<Collective>((sig >> kCollShift) & 0xF);
  auto t = static_cast<DataType>((sig >> kTypeShift) & 0xF);
  auto o = static_cast<ReduceOp>((sig >> kOpShift) & 0x7);
  return fmt::format("{} (type {}, op {})", collective_name(c), dtype_name(t), reduce_op_name(o));
}

std::string CallInfo::describe() const {
  return fmt::format("{} seq {} (type {}, op {}, count {}, root {})", collective_name(coll), seq, dtype_name(dtype),
                     reduce_op_name(op), count, root);
}

Status Call::explain_timeout(Status timeout) {
  timeout = fail(timeout);
  comm_.broadcast_abort(timeout, info());
  // Every rank stuck in this call times out at about the same moment and says what it is
  // doing; a short wait collects that.
  int64_t until = now_ns() + 300'000'000;
  std::vector<std::pair<int, CallInfo>> others;
  while (now_ns() < until) {
    others = comm_.remote_calls();
    if (static_cast<int>(others.size()) >= size_ - 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string mismatched;
  for (auto& [p, ci] : others)
    if (!ci.same_call(info())) mismatched += fmt::format("{}rank {} is in {}", mismatched.empty() ? "" : "; ", p, ci.describe());
  if (mismatched.empty()) return timeout;
  return fail(Status::InvalidArgument("{} while this rank is in {}: every rank must call the same collectives with "
                                      "the same arguments",
                                      mismatched, info().describe()));
}

void Call::cancel_receives() {
  if (seq_ == 0) return;
  for (int p = 0; p < size_; ++p)
    if (p != rank_) comm_.peer(p).cancel_recvs(tag(0), kCallMask);
}

void Call::cancel_all(CommImpl& comm) {
  for (int p = 0; p < comm.size(); ++p) {
    if (p == comm.rank() || !comm.connected(p)) continue;
    comm.peer(p).cancel_recvs(comm_prefix(comm.id()), kCommMask);
    comm.peer(p).cancel_recvs(CommImpl::abort_tag(comm.id()));
  }
}

Status Call::fail(Status why) const {
  if (why.ok()) return why;
  return Status(why.code(), fmt::format("{} seq {} ({}) on rank {} of communicator {:#x}: {}", collective_name(coll_),
                                        seq_, algo_, rank_, comm_.id(), why.message()));
}

Request Call::isend(int peer, const void* buf, size_t bytes, uint32_t step) {
  return comm_.peer(peer).send(buf, bytes, tag(step));
}

Request Call::isend_whole(int peer, const void* buf, size_t bytes, uint32_t step) {
  return comm_.send_whole(peer, buf, bytes, tag(step));
}

Request Call::isend_exchange(int peer, const void* buf, size_t bytes, uint32_t step) {
  return comm_.send_exchange(peer, buf, bytes, tag(step));
}

Request Call::irecv(int peer, void* buf, size_t bytes, uint32_t step) {
  // Match on communicator, sequence and step; the signature is checked after arrival.
  return comm_.peer(peer).recv(buf, bytes, tag(step), ~kSigMask);
}

// The deadline of a wait whose first slice (kSlice) just ran out: the communicator's timeout
// from when the wait began.
int64_t Call::slice_deadline() const {
  return now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kSlice).count() +
         std::chrono::duration_cast<std::chrono::nanoseconds>(comm_.timeout()).count();
}

Status Call::wait_recv(Request& r, int peer, size_t expected) {
  int64_t deadline = 0;  // set after the first slice: most waits end within it
  Status st;
  for (;;) {
    st = r.wait(kSlice);
    if (st.code() != Code::kTimeout) break;
    if (Status a = comm_.check_remote_abort(info()); !a.ok()) return fail(a);
    if (deadline == 0) deadline = slice_deadline();
    if (now_ns() > deadline)
      return explain_timeout(Status::Timeout("waited {} ms for rank {}: it has not reached this call (hung, slower, "
                                             "or called something else)",
                                             comm_.timeout().count(), peer));
  }
  if (st.code() == Code::kInvalidArgument && st.message().find("exceeds the receive buffer") != std::string::npos)
    return fail(Status::InvalidArgument("rank {} sent more data than this rank expects ({} bytes): the ranks "
                                        "passed different counts or roots",
                                        peer, expected));
  if (!st.ok()) return fail(st);
  uint64_t sig = r.tag() & kSigMask;
  if (sig != signature()) {
    uint64_t mine = signature();
    if ((sig & ~(0xFull << kHashShift)) != (mine & ~(0xFull << kHashShift)))
      return fail(Status::InvalidArgument("rank {} called {} where this rank called {}: every rank must call the "
                                          "same collectives in the same order",
                                          peer, describe_signature(sig), describe_signature(mine)));
    return fail(Status::InvalidArgument("rank {} called {} with another count or root than this rank (count {}, "
                                        "root {})",
                                        peer, collective_name(coll_), count_, root_));
  }
  if (r.bytes() != expected)
    return fail(Status::InvalidArgument("rank {} sent {} bytes where {} were expected: the ranks passed different "
                                        "counts",
                                        peer, r.bytes(), expected));
  return {};
}

Status Call::wait_send(Request& r, int peer) {
  int64_t deadline = 0;  // set after the first slice: most waits end within it
  for (;;) {
    Status st = r.wait(kSlice);
    if (st.code() != Code::kTimeout) return st.ok() ? st : fail(st);
    if (Status a = comm_.check_remote_abort(info()); !a.ok()) return fail(a);
    if (deadline == 0) deadline = slice_deadline();
    if (now_ns() > deadline)
      return explain_timeout(
          Status::Timeout("sending to rank {} did not complete within {} ms", peer, comm_.timeout().count()));
  }
}

Status Call::send(int peer, const void* buf, size_t bytes, uint32_t step) {
  Request r = isend(peer, buf, bytes, step);
  return wait_send(r, peer);
}

Status Call::recv(int peer, void* buf, size_t bytes, uint32_t step) {
  Request r = irecv(peer, buf, bytes, step);
  return wait_recv(r, peer, bytes);
}

Status Call::sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes, uint32_t step) {
  Request r = irecv(from, rbuf, rbytes, step);
  Request s = isend_exchange(to, sbuf, sbytes, step);
  PODNET_RETURN_IF_ERROR(wait_recv(r, from, rbytes));
  return wait_send(s, to);
}

void Call::reduce(void* inout, const void* in, size_t count) const {
  coll::reduce(op_, dtype_, inout, in, count);
}

void Call::reduce3(void* out, const void* a, const void* b, size_t count) const {
  coll::reduce3(op_, dtype_, out, a, b, count);
}

uint64_t Call::allocated_key(const void* p, size_t len) { return comm_.allocated_key(p, len); }

bool Call::copy_mapped(int peer, uint64_t key, uint64_t addr, void* local, size_t len, bool read) {
  return comm_.copy_mapped(peer, key, addr, local, len, read);
}

std::shared_ptr<const std::byte> Call::view_mapped(int peer, uint64_t key, uint64_t addr, size_t len) {
  return comm_.view_mapped(peer, key, addr, len);
}

std::byte* Call::scratch(size_t bytes, int which) { return comm_.scratch(bytes, which); }

}  // namespace podnet::detail
