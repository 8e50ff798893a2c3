// Collectives: a Communicator over the transfer engine, with several algorithms per
// collective and automatic selection.
//
//   auto world = podnet::World::create().value();
//   auto comm  = podnet::Communicator::create(*world).value();
//   Status st  = comm->allreduce(buf, buf, count, DataType::kFloat32, ReduceOp::kSum);
//
// Every rank of a communicator must call the same collectives in the same order with the
// same count, type, op and root. A rank that does not gets an error naming the mismatch and
// the ranks involved (never a hang, never corrupted data): calls are matched by a
// per-communicator sequence number, and each message carries the caller's collective, type
// and op. Every call has a timeout (PODNET_COLL_TIMEOUT_MS); a dead peer fails it with an
// error naming the peer.
//
// Thread-safety: a communicator is used by one thread at a time (as in MPI/NCCL); distinct
// communicators may be used concurrently from different threads.
#pragma once

#include <podnet/status.h>
#include <podnet/xfer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace podnet {

class World;

enum class DataType { kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kBfloat16, kFloat32, kFloat64 };
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

enum class Collective : uint8_t {
  kAllreduce = 1, kReduce, kBroadcast, kAllgather, kAllgatherv, kReduceScatter, kAlltoall, kAlltoallv,
  kGather, kScatter, kBarrier, kSendRecv,
};
std::string_view collective_name(Collective c) noexcept;

}  // namespace podnet

namespace podnet {

size_t dtype_size(DataType t) noexcept;
std::string_view dtype_name(DataType t) noexcept;      // nccl-tests names: float, half, ...
std::string_view reduce_op_name(ReduceOp op) noexcept;  // sum, prod, min, max, avg

namespace detail {
class CommImpl;
class WorkState;
}  // namespace detail

// A handle to a non-blocking collective. Copyable.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> s) : state_(std::move(s)) {}
  bool test() const;                                // complete?
  Status wait(std::chrono::nanoseconds timeout);    // kTimeout leaves it running
  Status wait();                                    // up to the communicator's timeout

 private:
  std::shared_ptr<detail::WorkState> state_;
};

class Communicator {
 public:
  // The communicator of every rank of the world. Collective: all ranks call it.
  static Result<std::unique_ptr<Communicator>> create(World& world);
  virtual ~Communicator() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual uint32_t id() const noexcept = 0;
  // Ranks with the same color form a new communicator, ordered by (key, rank); color < 0
  // takes no part (returns nullptr). Collective over this communicator.
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  virtual Result<std::unique_ptr<Communicator>> dup() = 0;
  // Fails every pending and future call with `why`; never waits for peers.
  virtual void abort(const Status& why) = 0;

  // Blocking collectives. `send` may equal `recv` (in place) where both exist.
  virtual Status allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) = 0;
  virtual Status reduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op, int root) = 0;
  virtual Status broadcast(void* buf, size_t count, DataType t, int root) = 0;
  // Out of place (as ncclBroadcast): the root's `send` lands in every rank's `recv`, the
  // root's own included; other ranks ignore `send`. The root copies into its `recv` while
  // its sends are in flight (over shm its receivers then copy their messages whole).
  virtual Status broadcast(const void* send, void* recv, size_t count, DataType t, int root) = 0;
  // recv holds size() * count elements, rank r's contribution at r * count.
  virtual Status allgather(const void* send, void* recv, size_t count, DataType t) = 0;
  virtual Status allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                            DataType t) = 0;
  // send holds size() * recv_count elements; rank r receives the reduction of block r.
  virtual Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) = 0;
  // send and recv hold size() * count elements; block j of rank i goes to block i of rank j.
  virtual Status alltoall(const void* send, void* recv, size_t count, DataType t) = 0;
  virtual Status alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                           const std::vector<size_t>& recv_counts, DataType t) = 0;
  virtual Status gather(const void* send, void* recv, size_t count, DataType t, int root) = 0;
  virtual Status scatter(const void* send, void* recv, size_t count, DataType t, int root) = 0;
  virtual Status barrier() = 0;
  virtual Status send(const void* buf, size_t count, DataType t, int peer) = 0;
  virtual Status recv(void* buf, size_t count, DataType t, int peer) = 0;

  // Non-blocking forms: the collective runs on the communicator's progress thread, in call
  // order with every other call on this communicator. Buffers must stay valid until done.
  virtual Work iallreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) = 0;
  virtual Work ibroadcast(void* buf, size_t count, DataType t, int root) = 0;
  virtual Work iallgather(const void* send, void* recv, size_t count, DataType t) = 0;
  virtual Work ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) = 0;
  virtual Work ialltoall(const void* send, void* recv, size_t count, DataType t) = 0;
  virtual Work ibarrier() = 0;

  // Forces an algorithm for one collective on this communicator (empty: back to the tuner;
  // PODNET_ALGO_<COLLECTIVE> sets the initial value). The error lists the valid names.
  // Every rank must make the same choice.
  virtual Status set_algorithm(Collective c, std::string_view name) = 0;
  // The algorithm the last call of a collective used ("ring", "recursive_doubling", ...).
  virtual std::string last_algorithm(Collective c) const = 0;
};

}  // namespace podnet
