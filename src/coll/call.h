// One collective call on one communicator: the tags its messages carry, the point-to-point
// primitives algorithms are written with, and the checks that turn a mismatch between ranks
// into a clear error.
//
// Tag layout (64 bits): bit 62 marks a collective message; bits 45..61 communicator id;
// 31..44 call sequence number (1..16383 for collectives, 0 for send/recv); 27..30 collective; 23..26 data type; 20..22 reduce op;
// 16..19 a hash of (count, root); 0..15 the algorithm's step. A receive matches on
// communicator, sequence and step only, then compares the rest: a peer that called another
// collective, type, op, count or root is reported, not silently mixed in.
#pragma once

#include <podnet/coll.h>

#include <memory>
#include <string>
#include <vector>

namespace podnet::detail {

class CommImpl;

// What a rank is doing, as carried in abort messages so that the other ranks can name a
// mismatch precisely.
struct CallInfo {
  uint32_t seq = 0;
  Collective coll = Collective::kBarrier;
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  uint64_t count = 0;
  int32_t root = -1;
  bool same_call(const CallInfo& o) const {
    return seq == o.seq && coll == o.coll && dtype == o.dtype && op == o.op && count == o.count && root == o.root;
  }
  std::string describe() const;
};

class Call {
 public:
  Call(CommImpl& comm, Collective coll, DataType t, ReduceOp op, size_t count, int root);

  int rank() const { return rank_; }
  int size() const { return size_; }
  DataType dtype() const { return dtype_; }
  ReduceOp op() const { return op_; }
  size_t esize() const { return esize_; }
  uint32_t seq() const { return seq_; }

  // Non-blocking point-to-point inside the call; `step` distinguishes the messages of one
  // call between the same pair of ranks.
  Request isend(int peer, const void* buf, size_t bytes, uint32_t step);
  // isend() for a rank that has a large copy of its own to make meanwhile (an out-of-place
  // root's copy into its output): the receiver copies the whole message
  // (TransportEndpoint::send_whole).
  Request isend_whole(int peer, const void* buf, size_t bytes, uint32_t step);
  // isend() for one step of an exchange: `peer` posts its receive for it before or while it
  // sends its own part (sendrecv, a ring's steps, an all-to-all), so it seldom arrives
  // unexpected and may go eagerly where a plain send waits for the receiver's clear-to-send
  // (TransportEndpoint::send_exchange). Rooted collectives, whose senders run ahead of their
  // receivers, use isend().
  Request isend_exchange(int peer, const void* buf, size_t bytes, uint32_t step);
  Request irecv(int peer, void* buf, size_t bytes, uint32_t step);
  // Waits with the communicator's timeout; checks the peer's signature and the length.
  Status wait_recv(Request& r, int peer, size_t expected_bytes);
  Status wait_send(Request& r, int peer);
  Status send(int peer, const void* buf, size_t bytes, uint32_t step);
  Status recv(int peer, void* buf, size_t bytes, uint32_t step);
  // Sends to `to` and receives from `from` at the same time.
  Status sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes, uint32_t step);

  // inout = op(inout, in) over `count` elements of the call's type (avg sums).
  void reduce(void* inout, const void* in, size_t count) const;
  void reduce3(void* out, const void* a, const void* b, size_t count) const;
  // A scratch buffer owned by the communicator, reused across calls.
  std::byte* scratch(size_t bytes, int which = 0);
  // CommImpl::allocated_key, copy_mapped and view_mapped, for the algorithms.
  uint64_t allocated_key(const void* p, size_t len);
  bool copy_mapped(int peer, uint64_t key, uint64_t addr, void* local, size_t len, bool read);
  std::shared_ptr<const std::byte> view_mapped(int peer, uint64_t key, uint64_t addr, size_t len);

  // "allreduce seq 12 (ring) on rank 3: " + what.
  Status fail(Status why) const;
  void set_algorithm(const char* name) { algo_ = name; }
  CallInfo info() const { return {seq_, coll_, dtype_, op_, count_, root_}; }
  const char* algorithm() const { return algo_; }
  CommImpl& comm() { return comm_; }
  // After a wait timed out: tells the others, gathers what they are doing for a moment, and
  // names the ranks that are in another call if there are any.
  Status explain_timeout(Status timeout);
  // After this call failed: cancels its receives that no message has reached yet, so that a
  // late message cannot land in the caller's buffers (or the communicator's scratch) after
  // the call returned. Collectives only (point-to-point shares one tag space per peer).
  void cancel_receives();
  // Every receive a communicator may still have posted: its collectives' and its abort
  // listeners' (the communicator is going away).
  static void cancel_all(CommImpl& comm);

 private:
  int64_t slice_deadline() const;
  uint64_t tag(uint32_t step) const;
  uint64_t signature() const;
  std::string describe_signature(uint64_t sig) const;

  CommImpl& comm_;
  Collective coll_;
  DataType dtype_;
  ReduceOp op_;
  size_t count_;
  int root_;
  int rank_, size_;
  size_t esize_;
  uint32_t seq_;
  uint64_t tag_base_;  // tag() without the step: computed once per call
  const char* algo_ = "?";
};

}  // namespace podnet::detail
