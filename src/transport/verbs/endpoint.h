// A verbs peer: two RC queue pairs, like shm's two channels. The "request" QP is the one this
// side connected: our operations go out on it and the peer's replies come back on it. The
// "serve" QP is the one the peer connected: the peer's operations arrive there and our
// replies (and rendezvous reads) leave from it. Self-connection is the same thing with both
// QPs in one process. All QPs share this endpoint's completion queue.
// With PODNET_VERBS_QPS = K > 1 each side also has K-1 "data lanes" per direction: RC QPs
// that carry only RDMA WRITE/READ chunks. A one-sided transfer (or rendezvous pull) of
// kStripeMin or more is cut into K stripes that go out on the request QP and the lanes at
// once; a smaller one goes whole to the next QP in turn; messages, immediates and heartbeats
// stay on the two main QPs.
//
// Protocols:
//   write / read   RDMA WRITE / READ, split into work requests of at most the chunk size.
//                  The target's rkey comes from a kResolve request, asked once per podnet key
//                  and cached; the reply carries the region's true bounds and rights, which
//                  every later operation is checked against before it is posted (a clear
//                  kAccessDenied, and the QP stays healthy). The NIC checks again: the MR
//                  grants exactly what podnet granted. A deregistered region's MR is gone and
//                  the target sends kRevoke to the peers that resolved it.
//   write_notify   the last chunk is RDMA WRITE_WITH_IMM (imm < 2^32) or a WRITE followed by
//                  a kNotify message; RC ordering places the data first. RC orders one QP
//                  only: when stripes went out on lanes, the last chunk waits for their
//                  completions (each one the target's acknowledgement that it was placed).
//   send           <= eager max: the payload is copied into a send slot and the request
//                  completes (the buffer is reusable); kEager lands in a receive buffer.
//                  Larger: the buffer is registered, kRts announces it; the receiver, once a
//                  receive matches, RDMA-READs it straight into the (registered) receive
//                  buffer and replies kFin, which completes the send.
//   credits        a request message or WRITE_WITH_IMM uses one of the peer's receive
//                  buffers; the peer returns credits on its replies (or in kCredit).
//   back-pressure  a full send queue, no credit or no send slot leaves the operation in a
//                  local FIFO (post order is kept); completions drain it. Nothing blocks.
//   liveness       an idle request QP RDMA-writes 8 bytes to the peer every heartbeat: a dead
//                  host turns into "retry exceeded"; the connection-setup socket closing
//                  (process exited) fails the endpoint at once.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/small_vector.h"
#include "base/spinlock.h"
#include "transport/matcher.h"
#include "transport/transport.h"
#include "transport/verbs/qp.h"
#include "transport/verbs/slot_table.h"

namespace podnet::verbs {

class VerbsTransport;

class VerbsEndpoint : public detail::TransportEndpoint, public std::enable_shared_from_this<VerbsEndpoint> {
 public:
  VerbsEndpoint(VerbsTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_host);
  ~VerbsEndpoint() override;

  // Connection set-up (the transport's socket handlers call these).
  Result<Hello> start_request_qp();             // our hello; kCancelled when already started
  Status on_reply(const Hello& reply);          // the peer accepted: connect, start posting
  Result<Hello> accept_serve_qp(const Hello& hello);  // the peer connected: our reply
  bool request_started() const;

  int peer_rank() const noexcept override { return peer_rank_; }
  std::string peer_name() const override;
  Req write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
            size_t len, const uint64_t* imm) override;
  Req read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
           size_t len) override;
  Req send(const void* buf, size_t len, uint64_t tag) override;
  Req recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) override;
  Req recv_notify() override;
  size_t cancel_recvs(uint64_t tag, uint64_t mask) override { return matcher_.cancel(tag, mask); }
  Status health() const override;

  int poll();              // drains the completion queue; returns completions handled
  // The peer went away: handles every completion queued (waiting for a thread polling now)
  // so that what it sent before counts; call before fail().
  void drain_departed();
  // This context closes: one step of letting what the endpoint queued leave before the
  // goodbye (an eager send completes once copied, maybe into the queue while the peer has
  // no credits). True once the queue is empty and every work request on the request QPs is
  // retired (a completion on an RC QP means the peer's NIC has it, and everything before
  // it); posts a signaled empty write where only unsignaled messages are in flight.
  bool quiet_for_close();
  bool arm();              // requests a completion event; false if work arrived meanwhile
  void tick(int64_t now_ns);
  void revoke(uint64_t key);           // a local region peers may know was deregistered
  // Sticky; completes everything pending with the error. `quiet`: an orderly close (logged
  // at info, not as a warning).
  void fail(const Status& why, bool quiet = false);
  void release_resources();            // the transport is going away: QPs and CQ first
  ibv_cq* cq() const { return cq_.load(std::memory_order_acquire); }

 private:
  int poll_locked(ibv_cq* cq);  // poll_mu_ held
  // A signaled empty RDMA write (no address or key needed at the target, IBA C9-88): its
  // completion retires the unsignaled work requests before it. With mu_ held.
  void post_empty_write(QueuePair& q);
  struct KeyInfo {
    bool resolved = false;
    bool asked = false;
    uint64_t base = 0, length = 0;
    uint32_t rkey = 0;
    Access access = Access::kNone;
  };
  enum class Kind { kWrite, kRead, kEager, kRts, kResolve };
  struct Pending {
    Kind kind = Kind::kWrite;
    Req req;
    // write / read
    std::byte* laddr = nullptr;
    uint32_t lkey = 0;
    uint64_t key = 0, raddr = 0;
    size_t len = 0, posted = 0;
    bool data_posted = false;
    bool notify = false;
    int lane = -1;  // a whole (unstriped) transfer's QP once chosen
    uint64_t imm = 0;
    uint64_t op_id = 0;
    // messages
    uint64_t tag = 0, id = 0;
    std::vector<std::byte> payload;
    ibv_mr* mr = nullptr;
  };
  struct Op {  // a one-sided operation or a rendezvous pull with work requests in flight
    Req req;
    int outstanding = 0;
    int lane_outstanding = 0;  // of those, on data lanes (write_notify's last chunk waits for 0)
    bool all_posted = false;
    bool pull = false;
    ibv_mr* mr = nullptr;      // pull: the registered receive buffer
    uint64_t rdv_id = 0;
    detail::PostedRecv recv;   // pull
    size_t len = 0;
    uint64_t tag = 0;
  };
  struct RtsInfo {
    uint64_t tag = 0;
    uint64_t addr = 0;
    uint32_t rkey = 0;
    size_t len = 0;
  };
  struct SendWait {
    Req req;
    ibv_mr* mr = nullptr;
  };
  struct PullWork {
    uint64_t op_id;
    uint64_t raddr;
    uint32_t rkey;
    std::byte* laddr;
    uint32_t lkey;
    size_t len, posted;
    int lane = -1;
  };
  // Completions collected under mu_ and delivered after it is released (a callback may post).
  struct Done {
    SmallVector<std::pair<Req, Status>, 4> reqs;
    Status matcher_failure;
  };

  // With data lanes, a transfer below kStripeMin goes whole to one QP, round-robin per
  // operation (write_notify: the main QP); from kStripeMin it is cut into one stripe per QP.
  static constexpr size_t kStripeMin = 256 << 10;
  // Up to this many handled receive buffers wait for the next poll() to be re-posted.
  static constexpr size_t kRepostLater = 8;

  // The QP a completion came from: main or lane, request side or serve side.
  struct QpRef {
    QueuePair* qp = nullptr;
    bool on_req = false;
    int lane = 0;  // 0: the main QP; i > 0: data lane i
  };
  QpRef find_qp(uint32_t qpn) const;
  // The stripe of a transfer of len bytes over `qps` queue pairs (chunk when not striped).
  size_t stripe(size_t len, size_t qps) const;
  // The QP (0: main, i: lane i) for the piece at `posted` of a transfer striped by `piece`;
  // a whole transfer keeps the lane it was given (`lane`, from the round-robin `next`).
  static size_t pick_lane(size_t len, size_t posted, size_t piece, size_t qps, int& lane, size_t& next);
  Status create_lanes(std::vector<std::unique_ptr<QueuePair>>& lanes, size_t n);
  Status connect_lanes(std::vector<std::unique_ptr<QueuePair>>& lanes, const Hello& peer);
  Status ensure_cq();
  Hello hello(Hello::Kind kind, const QueuePair& q, const std::vector<std::unique_ptr<QueuePair>>& lanes) const;
  QpShape shape(bool request_qp) const;
  std::shared_ptr<detail::RequestState> new_request(const char* op);
  Req failed_request(const char* op, const Status& why);
  Status op_error(const detail::RequestState& r, const Status& why) const;
  void enqueue(Pending p);
  // Posts what the queues and credits allow, in order. With mu_ held.
  void pump(Done& done);
  bool post_pending(Pending& p, Done& done);  // true when p is done with (posted, or refused)
  void settle(Done& done);                    // after posting: flushes, and fails on a post error
  bool pump_one_sided(Pending& p, Done& done);
  bool post_message(const Msg& m, const void* payload, size_t len);  // request QP; uses a credit
  bool post_reply(Msg m);                                            // serve QP
  bool post_slot(QueuePair& q, const Msg& m, const void* payload, size_t len, const char* what);
  bool post_rdma(QueuePair& q, ibv_wr_opcode opcode, uint64_t wr_id, std::byte* laddr, uint32_t lkey, size_t len,
                 uint64_t raddr, uint32_t rkey, uint32_t imm_be, bool may_skip_signal = false);
  void flush_unsignaled();
  bool needs_flush() const;  // a QP has unsignaled chunks with nothing signaled behind them
  void chunk_done(uint64_t wr_id, int lane, Done& done);  // a kChunk / kPull work request completed
  void pump_pulls();
  void start_pull(detail::PostedRecv recv, uint64_t rdv_id, Done& done);
  void fail_key(uint64_t key, const Status& why, Done& done);
  void finish(Done& done);
  void handle(const ibv_wc& wc, Done& done);
  void repost(Done& done);
  void owe_credits();
  void on_request_msg(const Msg& m, const std::byte* payload, Done& done);
  void on_reply_msg(const Msg& m, Done& done);
  void on_send_done(const ibv_wc& wc, bool request_qp, Done& done);
  void fail_locked(const Status& why, Done& done, bool quiet = false);
  std::string wc_error(const ibv_wc& wc, const char* what) const;

  VerbsTransport* transport_;
  const uint64_t peer_id_;
  const int peer_rank_;
  const std::string peer_host_;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<ibv_cq*> cq_{nullptr};

  mutable std::mutex mu_;  // everything below
  std::unique_ptr<QueuePair> req_qp_, serve_qp_;
  std::vector<std::unique_ptr<QueuePair>> req_lanes_, serve_lanes_;  // data lanes (PODNET_VERBS_QPS - 1)
  Hello peer_req_{}, peer_serve_{};  // the peer's hellos (GID, heartbeat target)
  bool connected_ = false;
  int credits_ = 0;
  int credits_owed_ = 0;  // serve-QP receive buffers re-posted and not yet reported
  std::deque<Pending> pending_;
  std::deque<Msg> replies_;
  std::deque<PullWork> pulls_;
  std::unordered_map<uint64_t, KeyInfo> keys_;
  SlotTable<Op> ops_;  // one-sided operations and pulls with work requests in flight (id in wr_id)
  std::unordered_map<uint64_t, SendWait> sends_;    // rendezvous sends waiting for kFin
  std::unordered_map<uint64_t, RtsInfo> rts_;       // announced rendezvous messages
  std::vector<uint64_t> served_keys_;               // keys this peer resolved here
  uint64_t next_rdv_ = 1;
  size_t next_lane_ = 0, next_pull_lane_ = 0;  // round-robin of whole transfers over the QPs
  Status failed_;
  Status post_failed_;  // an ibv_post_send error inside pump(): fails the endpoint there
  int64_t created_ns_ = 0;
  // Work requests posted (counted, not timed: a clock read per post was 70 instructions);
  // tick() notes when the count last changed, and heartbeats once it stayed put long enough.
  uint64_t posts_ = 0, posts_seen_ = 0;
  int64_t quiet_since_ns_ = 0;
  SpinLock poll_mu_;  // one thread drains the CQ at a time (keeps message order)
  std::vector<uint64_t> retired_;  // handle(): unsignaled chunks a completion retired
  // Receive buffers handled and not yet re-posted (poll() re-posts them first thing, then the
  // serve QP's count as credits owed); repost_count_ mirrors the size for a lock-free check.
  std::vector<std::pair<QueuePair*, uint32_t>> reposts_;
  std::atomic<uint32_t> repost_count_{0};
  std::vector<std::byte> beat_;
  ibv_mr* beat_mr_ = nullptr;

  detail::TagMatcher matcher_;
};

}  // namespace podnet::verbs
