// A shared-memory peer: the channel this side connected (its requests, and the replies to
// them) and the channel the peer connected (the peer's requests, and our replies).
//
// Protocols (records in ring.h):
//   write      <= eager max, or no cross-memory attach: kWrite fragments with the payload;
//              the target checks key, bounds and rights, copies, and acks the last fragment
//              (or any refused one). Larger: one kWriteCma; the target checks and pulls the
//              data with process_vm_readv (one copy), then acks.
//   read       kRead; the target checks, then either pushes the data with process_vm_writev
//              and acks, or replies with kReadData fragments.
//   send       <= eager max: kSend fragments (copied out of the ring at the receiver);
//              larger: kRts; once a receive matches, the receiver pulls the payload with
//              process_vm_readv straight into the receive buffer and replies kFin. When the
//              payload lies in memory the sender allocated (kRts imm = the region's key) and
//              the receiver mapped that region (see mapped), the pull is a memcpy; a split
//              one then pulls it all, unless the receive buffer lies in memory the receiver
//              allocated with remote-write rights (its kCts carries that key), which the
//              sender pushes its half into through its own mapping.
//              From PODNET_SHM_SPLIT_MIN (PODNET_SHM_SPLIT_CROWDED while the host is
//              crowded: ShmTransport::split), when each side may write the other's memory
//              (kSplit): the receiver replies kCts with its buffer, then pulls the first half
//              while the sender pushes the second (process_vm_writev) and says kPushDone:
//              two cores copy at once. The receive completes on its pull and kPushDone, the
//              send on its push and kFin. Without cross-memory attach (kRts with kRing): once
//              a receive matches, the receiver replies kCts (kRing) and the sender emits the
//              payload as kRdvData fragments, which the receiver copies straight into the
//              receive (nothing is buffered for a receive not yet posted); the send completes
//              when its last fragment is in the ring, the receive with that fragment.
//   split      write and read from PODNET_SHM_SPLIT_MIN: the target checks, replies kCts,
//              copies the first half while the initiator copies the second and says
//              kPushDone; then the target acks (write: after the notification).
//   write_notify  as write, with kNotify on the record that completes the data: the target
//              delivers the immediate after placing the data (ring order = post order).
//   mapped     write and read on a region the peer allocated (its key has kMappableKeyBit):
//              the first one also sends kMapReq; the target answers kMapResp with its memfd's
//              descriptor, which the initiator takes with pidfd_getfd and maps (mapped.cc).
//              From then on the operation is a memcpy in the caller's thread, complete when
//              write()/read() returns, while no ring one-sided operation is in flight (so
//              operations still land in the order they were posted). When the local buffer
//              is allocated memory too and the copy is large enough to split, it goes on the
//              ring as a split instead (kWriteCma / kRead with kOwnKey: the initiator's region
//              key): the target copies its half through its mapping of the initiator's
//              region, the initiator its half through its mapping of the target's (the kCts
//              carries the key): two memcpys at once. Any kOwnKey record lets the target use
//              that mapping in place of cross-memory attach (a write_notify too).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "transport/mapped_memory.h"
#include "transport/matcher.h"
#include "transport/registry.h"
#include "transport/shm/channel.h"
#include "transport/transport.h"

namespace podnet::shm {

class ShmTransport;

class ShmEndpoint : public detail::TransportEndpoint, public std::enable_shared_from_this<ShmEndpoint> {
 public:
  ShmEndpoint(ShmTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_socket, pid_t peer_pid);
  ~ShmEndpoint() override;
  // Halves of split copies that initiators in this process have copied (tests: which
  // transfers split).
  static uint64_t split_pushes() noexcept;
  // Of those, the halves copied through a mapping of the peer's allocated memory.
  static uint64_t mapped_pushes() noexcept;
  // Copies that targets in this process made through their mapping of the initiator's own
  // region (kOwnKey) instead of with cross-memory attach (tests).
  static uint64_t own_key_copies() noexcept;

  Result<std::shared_ptr<Channel>> start_outgoing();  // nullptr when already started
  Status attach_incoming(std::shared_ptr<Channel> c);
  void on_reply(const Hello& reply, int peer_doorbell);

  int peer_rank() const noexcept override { return peer_rank_; }
  std::string peer_name() const override;
  Req write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
            size_t len, const uint64_t* imm) override;
  Req read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
           size_t len) override;
  Req send(const void* buf, size_t len, uint64_t tag) override { return send_or_done(buf, len, tag, nullptr); }
  Req send_or_done(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq) override {
    return post_send(buf, len, tag, done_seq, true);
  }
  Req send_whole(const void* buf, size_t len, uint64_t tag) override {
    return post_send(buf, len, tag, nullptr, false);
  }
  Req recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) override;
  Req recv_notify() override;
  size_t cancel_recvs(uint64_t tag, uint64_t mask) override { return matcher_.cancel(tag, mask); }
  Status health() const override;
  bool copy_mapped_now(uint64_t key, uint64_t addr, void* local, size_t len, bool read) override;
  std::shared_ptr<const std::byte> view_mapped(uint64_t key, uint64_t addr, size_t len) override;

  int poll();
  // The peer went away, or said goodbye: handles every record left in the rings (poll()
  // takes a bounded number, and none while another thread consumes), so that what it sent
  // before counts; call before fail(). `peer_waits`: the peer said goodbye and waits for our
  // hang-up, so its memory may still be copied into and out of; otherwise (it hung up) it
  // handed its requests back, and records that name its memory fail instead.
  void drain_departed(bool peer_waits);
  // Whether the peer is this process: its rings only change when this process publishes
  // (Channel::local_publishes).
  bool same_process() const {
    Channel* c = out_raw_.load(std::memory_order_acquire);
    if (c == nullptr) c = in_raw_.load(std::memory_order_acquire);
    return c != nullptr && c->same_process();
  }
  bool arm();
  void disarm();
  void tick(int64_t now_ns);
  void set_graceful() { graceful_.store(true); }
  // Says goodbye on both channels; the peer answers by hanging up once it handled what this
  // side posted (ShmTransport::shutdown waits for that: awaits_goodbye).
  void close_gracefully();
  bool awaits_goodbye() const;   // goodbye said, the channel was open and the peer is still here
  void hang_up();                // the peer sees both sockets close
  void fail(const Status& why);  // sticky; completes everything pending with the error

 private:
  struct Op {
    std::shared_ptr<detail::RequestState> req;
    std::byte* dst = nullptr;  // the local buffer (read: destination; write, send: source)
    size_t len = 0;
    bool read = false;
    // A write sent in fragments that the target refused: the first refusal, reported when
    // the last fragment is acknowledged (the others still read the source until then).
    Status refused = Status::Ok();
  };
  // Target side of a split one-sided operation: the region stays pinned until both halves
  // are copied (ours and the initiator's, announced by kPushDone).
  struct SplitOp {
    std::shared_ptr<detail::RegionPin> pin;
    RecHdr hdr{};
    int parts = 2;
    Status first_error;
    uint64_t arrival = 0;  // a write's place in the order of writes (arrive_split)
  };
  // The eager message whose fragments are arriving on the incoming channel.
  struct Incoming {
    std::optional<detail::PostedRecv> posted;
    std::shared_ptr<detail::UnexpectedMsg> msg;
    std::byte* dst = nullptr;
    bool discard = false;
  };
  struct Liveness {
    uint64_t seen = 0;
    int64_t since_ns = 0;
  };

  std::shared_ptr<detail::RequestState> new_request(const char* op);
  // send_or_done(), with the split copy allowed (`may_split`) or not (send_whole).
  Req post_send(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq, bool may_split);
  Status op_failure(const detail::RequestState& r, const Status& why) const;
  // Why this side may no longer copy into or out of the peer's memory (Ok: it may): once it
  // said goodbye (the peer fails right after handling this side's records, at a moment this
  // side does not know), or while handling the records of a peer that hung up (it handed its
  // requests back already).
  Status peer_memory_closed() const;
  // Around a copy into or out of the peer's memory: enter_peer_copy() refuses once that is
  // closed (peer_memory_closed), else counts the copy until leave_peer_copy(), so that
  // close_gracefully() and fail() can wait for copies already running. Nothing between the
  // two may complete a request or call fail(): they would wait for their own thread.
  Status enter_peer_copy();
  void leave_peer_copy() { peer_copies_.fetch_sub(1, std::memory_order_seq_cst); }
  // A copy with the peer's memory for as long as it lives: status() says whether it may go
  // (enter_peer_copy), and it stops counting when it goes out of scope.
  class PeerCopy {
   public:
    explicit PeerCopy(ShmEndpoint& ep) : ep_(ep), why_(ep.enter_peer_copy()) {}
    ~PeerCopy() {
      if (why_.ok()) ep_.leave_peer_copy();
    }
    PeerCopy(const PeerCopy&) = delete;
    PeerCopy& operator=(const PeerCopy&) = delete;
    const Status& status() const { return why_; }

   private:
    ShmEndpoint& ep_;
    Status why_;
  };
  // Closes peer memory for `why` (kSaidGoodbye, kEndpointFailed: no copy starts any more,
  // unless it closed already) and waits for the copies already running.
  void close_peer_memory(int why);
  // The error a receive from this peer fails with when the endpoint fails for `why`.
  Status recv_failure(const Status& why) const;
  Req failed_request(const char* op, const Status& why);
  // Records the operation unless the endpoint failed (then returns the sticky error).
  Status track(uint64_t seq, Op op);
  // Posts op; `req`, when given, completes once the payload is in the ring (instead of
  // op.on_emitted: no pointer copy when that is at once).
  void post(Channel& ch, OutOp op, const Req* req = nullptr);
  void reply(const RecHdr& h, Rec type, const Status& st, uint8_t flags);
  void on_request(const RecHdr& h);
  void on_reply_record(const RecHdr& h);
  void on_send_fragment(const RecHdr& h);
  void on_rdv_data(const RecHdr& h);
  std::optional<Op> take_send(uint64_t seq);  // a rendezvous send, out of sends_ (once)
  void on_write(const RecHdr& h);
  void on_read(const RecHdr& h);
  void pull_rendezvous(detail::PostedRecv recv, uint64_t seq, size_t len, uint64_t tag, bool split);
  void on_cts(const RecHdr& h);
  // Target: starts a split write or read (kCts to the initiator, then our half).
  void start_split(const RecHdr& h, detail::RegionPin pin);
  void split_part_done(uint64_t seq, const Status& st);
  void check_liveness(Channel& ch, Liveness& l, int64_t now_ns, const char* which);
  // Mapped regions (mapped.cc). The mapping of `key` once learned, else null (asks the peer
  // for it the first time the key is seen).
  std::shared_ptr<detail::PeerMapping> mapping_for(Channel& ch, uint64_t key);
  // The mapping of `key` when it is learned, live, and [addr, addr + len) lies inside it with
  // `need`; else null (copy_mapped_now, view_mapped).
  std::shared_ptr<detail::PeerMapping> usable_mapping(uint64_t key, uint64_t addr, size_t len, Access need);
  // How a write or read of `len` bytes between `local` and the peer's region `remote_key`
  // moves past the mapped fast path: split (kSplit: both sides copy a half); own_key
  // (kOwnKey, ring.h: a cross-memory copy tells the target the `local` region's key;
  // attach_own_key() adds it to the record); shared (split between two allocated regions:
  // both halves through mappings, so not copied here whole by copy_mapped). At the target,
  // copy_with_initiator() copies between `local` and the initiator's buffer at h.aux through
  // this side's mapping of that region, when it is learned and covers the range (false: copy
  // another way).
  struct CopyPlan {
    bool split = false, own_key = false, shared = false;
  };
  CopyPlan plan_copy(const Channel& ch, const detail::RegionState& local, uint64_t remote_key, size_t len,
                     bool read) const;
  static void attach_own_key(OutOp& op, uint64_t local_key);
  bool copy_with_initiator(const RecHdr& h, std::byte* local, size_t len);
  // The operation as a memcpy through the mapping of the peer's region `key`; null when it
  // must take the ring instead (not an allocated region, not mapped yet, or an earlier
  // operation still on the ring).
  Req copy_mapped(Channel& ch, const char* name, uint64_t key, uint64_t addr, std::byte* local, size_t len,
                  bool read);
  // Unmaps the regions their owner deregistered (every tick): a mapping of a freed region
  // would otherwise hold its pages until this side happened to touch the key again.
  void drop_revoked_mappings();
  void on_map_request(const RecHdr& h);
  void on_map_reply(const RecHdr& h);

  ShmTransport* transport_;
  const uint64_t peer_id_;
  const int peer_rank_;
  const std::string peer_socket_;
  std::atomic<pid_t> peer_pid_;
  std::atomic<uint64_t> next_seq_{1};

  mutable std::mutex ch_mu_;
  std::shared_ptr<Channel> out_, in_;  // set once, kept until the endpoint dies
  std::atomic<Channel*> out_raw_{nullptr}, in_raw_{nullptr};  // the same, for the lock-free poll

  mutable std::mutex mu_;  // ops_, sends_, rts_src_, failed_
  std::unordered_map<uint64_t, Op> ops_;          // writes and reads waiting for replies
  std::unordered_map<uint64_t, Op> sends_;        // rendezvous sends waiting for kFin
  // Announced rendezvous: seq -> the sender's address, and the key of the allocated region
  // that holds it (0: none).
  struct RtsSource {
    uint64_t addr = 0, region = 0;
    bool ring = false;  // kRing: the payload comes through the ring once we send kCts
  };
  std::unordered_map<uint64_t, RtsSource> rts_src_;
  // Split rendezvous receives waiting for the sender's half (kPushDone).
  std::unordered_map<uint64_t, std::shared_ptr<detail::RequestState>> split_recvs_;
  std::unordered_map<uint64_t, SplitOp> split_ops_;  // split writes and reads (target side)

  // Placement order at the target (copy.cc): a notification is delivered only once every
  // write that arrived before it is in place, as over an RC queue pair. A split write is in
  // place only when the initiator's half is too (kPushDone), so from a split write on, the
  // writes that matter (split or notified) queue in arrival order until those before them
  // are placed. Touched only by the incoming channel's consumer.
  struct Arrival {
    bool placed = false, notify = false;
    uint64_t imm = 0;
  };
  uint64_t arrive_split();                                   // a split write, not yet in place: its number
  void placed_split(uint64_t arrival, const uint64_t* imm);  // imm: its notification, if any
  void notify_in_order(uint64_t imm);                        // a write placed on arrival, with a notification
  std::deque<Arrival> order_;
  uint64_t order_base_ = 0;  // the number of order_.front()
  // Ring rendezvous receives (kRing), by the send's seq, while its kRdvData fragments arrive.
  struct RingRecv {
    std::byte* buf = nullptr;
    size_t len = 0;
    std::shared_ptr<detail::RequestState> req;
  };
  std::unordered_map<uint64_t, RingRecv> ring_recvs_;
  Status failed_;
  std::atomic<bool> failed_flag_{false};
  std::atomic<bool> graceful_{false};
  std::atomic<int> peer_memory_{0};  // kPeerMemoryOpen, or why it closed (peer_memory_closed)
  std::atomic<int> peer_copies_{0};  // copies with the peer's memory running (enter_peer_copy)

  std::mutex map_mu_;  // maps_, opening pidfd_
  // The peer's allocated regions mapped here, by key; null while asked, or once refused.
  std::unordered_map<uint64_t, std::shared_ptr<detail::PeerMapping>> maps_;
  std::atomic<int> pidfd_{-1};  // the peer's process, opened at the first mapping
  // Mapped copies need no progress thread, which may not get the CPU to see the peer's
  // hang-up while a caller copies in a loop: they ask the pidfd themselves, at most once a
  // millisecond (peer_exited()).
  std::atomic<int64_t> exit_checked_ns_{0};
  bool peer_exited();

  detail::TagMatcher matcher_;
  Incoming incoming_;                 // touched only while consuming the incoming channel
  Liveness out_live_, in_live_;       // touched only by tick()
  int64_t created_ns_ = 0;
};

}  // namespace podnet::shm
