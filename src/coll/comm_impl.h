// The communicator: members (world ranks), endpoints to them, call sequencing, scratch
// buffers, the tuner, and a worker thread for non-blocking calls.
#pragma once

#include <podnet/coll.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "coll/arena.h"
#include "coll/call.h"

namespace podnet::detail {

class WorkState {
 public:
  void finish(Status st);
  bool done() const { return done_.load(std::memory_order_acquire); }
  Status wait(std::chrono::nanoseconds timeout);

 private:
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Status status_;
};

class CommImpl final : public Communicator {
 public:
  CommImpl(World& world, std::vector<int> members, int rank, uint32_t id);
  ~CommImpl() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(members_.size()); }
  uint32_t id() const noexcept override { return id_; }
  Result<std::unique_ptr<Communicator>> split(int color, int key) override;
  Result<std::unique_ptr<Communicator>> dup() override;
  void abort(const Status& why) override;

  Status allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) override;
  Status reduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op, int root) override;
  Status broadcast(void* buf, size_t count, DataType t, int root) override;
  Status broadcast(const void* send, void* recv, size_t count, DataType t, int root) override;
  Status allgather(const void* send, void* recv, size_t count, DataType t) override;
  Status allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                    DataType t) override;
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) override;
  Status alltoall(const void* send, void* recv, size_t count, DataType t) override;
  Status alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                   const std::vector<size_t>& recv_counts, DataType t) override;
  Status gather(const void* send, void* recv, size_t count, DataType t, int root) override;
  Status scatter(const void* send, void* recv, size_t count, DataType t, int root) override;
  Status barrier() override;
  Status send(const void* buf, size_t count, DataType t, int peer) override;
  Status recv(void* buf, size_t count, DataType t, int peer) override;

  Work iallreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) override;
  Work ibroadcast(void* buf, size_t count, DataType t, int root) override;
  Work iallgather(const void* send, void* recv, size_t count, DataType t) override;
  Work ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) override;
  Work ialltoall(const void* send, void* recv, size_t count, DataType t) override;
  Work ibarrier() override;
  Status set_algorithm(Collective c, std::string_view name) override;
  std::string last_algorithm(Collective c) const override;

  // For Call.
  Endpoint& peer(int r) { return *eps_[r]; }
  bool connected(int r) const { return eps_[r] != nullptr; }
  static uint64_t abort_tag(uint32_t id);
  uint32_t next_seq() { return ++seq_; }
  uint32_t next_p2p_seq(int peer, bool sending) { return ++(sending ? p2p_send_seq_ : p2p_recv_seq_)[peer]; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Status aborted() const;
  // Checks for an abort another rank sent (a mismatch it found, say); makes it this
  // communicator's abort status too.
  Status check_remote_abort(const CallInfo& mine);
  // What the ranks that sent an abort said they were doing.
  std::vector<std::pair<int, CallInfo>> remote_calls();
  // Tells every other rank (fire and forget) that this communicator is aborted, and why.
  void broadcast_abort(const Status& why, const CallInfo& mine);
  std::byte* scratch(size_t bytes, int which);
  std::string_view algo_override(Collective c) const;
  // The algorithm for a call with `bytes` (as the tuner sees them): the forced one, else
  // "shm" when the call fits the shared arena, else the tuner's choice.
  std::string_view pick(Collective c, size_t bytes);    // choose(), remembered per collective
  std::string_view choose(Collective c, size_t bytes);  // the override, the arena, or the tuner
  Arena* arena() { return arena_.get(); }
  // Memory this rank allocated with Context::allocate_memory that holds [p, p + len): its
  // key (what the arena posts beside an address), else 0.
  uint64_t allocated_key(const void* p, size_t len);
  // A copy to or from rank r's allocated region `key` through this rank's mapping of it
  // (TransportEndpoint::copy_mapped_now): true when done, false when the caller must copy
  // another way.
  bool copy_mapped(int r, uint64_t key, uint64_t addr, void* local, size_t len, bool read);
  // A send to rank r that its receiver copies whole (TransportEndpoint::send_whole).
  Request send_whole(int r, const void* buf, size_t len, uint64_t tag);
  // A send to rank r that is one step of an exchange (TransportEndpoint::send_exchange).
  Request send_exchange(int r, const void* buf, size_t len, uint64_t tag);
  // Rank r's bytes at `addr` in its allocated region `key`, read in place through this
  // rank's mapping (TransportEndpoint::view_mapped), or null.
  std::shared_ptr<const std::byte> view_mapped(int r, uint64_t key, uint64_t addr, size_t len);
  // How many copies copy_mapped made, and views view_mapped gave (for tests and diagnostics).
  uint64_t mapped_copies() const { return mapped_copies_.load(std::memory_order_relaxed); }
  uint64_t mapped_views() const { return mapped_views_.load(std::memory_order_relaxed); }

 private:
  // Runs `body` (Status(Call&)) as one call: sequencing, error context, algorithm bookkeeping.
  template <typename Body>
  Status run(Collective c, DataType t, ReduceOp op, size_t count, int root, Body&& body);
  Status check_root(const char* what, int root) const;
  // Once, at the first collective: maps the shared arena when every rank is on this host.
  Status setup_arena();
  Work enqueue(std::function<Status()> fn);
  void arm_abort_listeners();
  void worker_loop();
  void drain_queue();

  World& world_;
  std::vector<int> members_;
  int rank_;
  uint32_t id_;
  uint32_t seq_ = 0;
  uint32_t splits_ = 0;
  std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<Endpoint>> eps_;
  std::vector<uint32_t> p2p_send_seq_, p2p_recv_seq_;
  std::vector<std::vector<std::byte>> scratch_;
  void retire_scratch();
  std::unique_ptr<Arena> arena_;
  bool arena_tried_ = false;
  bool warned_shm_fallback_ = false;
  // Forced algorithms: the names' own static strings (from algorithms_for), never copies.
  std::map<Collective, std::string_view> overrides_;
  // pick()'s last answer per collective (its inputs other than the size change only through
  // set_algorithm(), which clears this): a repeated size costs a compare, not a tuner lookup.
  struct PickMemo {
    size_t bytes = SIZE_MAX;
    std::string_view algo;
  };
  std::array<PickMemo, static_cast<size_t>(Collective::kSendRecv) + 1> pick_memo_{};
  // Written by whichever thread runs the call, read by the user: static strings only.
  std::array<std::atomic<const char*>, static_cast<size_t>(Collective::kSendRecv) + 1> last_algo_{};

  mutable std::mutex abort_mu_;
  Status aborted_;
  std::atomic<bool> is_aborted_{false};  // aborted_ is set: the fast path skips the lock
  // One receive per peer for its abort message (tag bits 62 and 63 both set).
  std::vector<Request> abort_listeners_;
  std::vector<std::shared_ptr<std::string>> abort_texts_;
  bool listeners_posted_ = false;  // the communicator's thread only
  bool listeners_armed_ = false;  // under abort_mu_: eps_ is complete (broadcast_abort may use it)
  bool abort_sent_ = false;

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<std::pair<std::function<Status()>, std::shared_ptr<WorkState>>> queue_;
  bool busy_ = false;
  std::atomic<uint64_t> mapped_copies_{0}, mapped_views_{0};
  std::atomic<int> inflight_{0};  // queued or running non-blocking calls: the fast path skips the lock
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace podnet::detail
