// One RC queue pair with its buffers: receive buffers (one registered slab, all posted) and
// send slots (one registered slab) that two-sided messages are copied into.
// Thread-safety: ibv_post_* are thread-safe; the slot free list is not (the endpoint's lock).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/verbs/device.h"
#include "transport/verbs/send_queue.h"
#include "transport/verbs/wire.h"

namespace podnet::verbs {

// wr_id layout: kind in the top 4 bits, a slot in the next 20, an id in the low 40.
enum class WrKind : uint64_t { kRecv = 1, kSlot, kChunk, kPull, kBeat, kInline };
inline uint64_t make_wr_id(WrKind k, uint64_t slot, uint64_t id) {
  return static_cast<uint64_t>(k) << 60 | (slot & 0xFFFFF) << 40 | (id & 0xFFFFFFFFFFull);
}
inline WrKind wr_kind(uint64_t wr_id) { return static_cast<WrKind>(wr_id >> 60); }
inline uint32_t wr_slot(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 40 & 0xFFFFF); }
inline uint64_t wr_op(uint64_t wr_id) { return wr_id & 0xFFFFFFFFFFull; }

inline constexpr uint32_t kMaxInline = 256;  // PODNET_VERBS_INLINE's ceiling (a stack buffer)

struct QpShape {
  int sq_depth = 256;
  int signal_every = 16;  // SendQueueCount
  int recv_depth = 128;
  uint32_t recv_size = 64;  // bytes per receive buffer
  int send_slots = 128;
  uint32_t slot_size = 64;  // bytes per send slot
  uint32_t inline_bytes = 0;  // asked of the device for inline sends (0: none)
};

class QueuePair {
 public:
  // Creates the QP in INIT with every receive buffer posted (a peer may send as soon as it
  // is connected).
  static Result<std::unique_ptr<QueuePair>> create(Device& device, ibv_cq* cq, const QpShape& shape);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  // INIT -> RTR -> RTS towards the peer's queue pair.
  Status connect(const Hello& peer, const VerbsOptions& options);

  uint32_t qpn() const { return qp_->qp_num; }
  uint32_t psn() const { return psn_; }
  ibv_qp* qp() { return qp_; }
  const QpShape& shape() const { return shape_; }
  int path_mtu() const { return path_mtu_; }

  const std::byte* recv_buffer(uint32_t i) const { return recv_.data() + size_t{i} * shape_.recv_size; }
  Status post_recv(uint32_t i);

  // Send slots: nullopt-like -1 when none is free.
  int take_slot();
  void give_slot(int slot) { free_slots_.push_back(slot); }
  std::byte* slot(int s) { return slots_.data() + size_t(s) * shape_.slot_size; }
  uint32_t slot_lkey() const { return slots_mr_->lkey; }

  // Bytes a send may carry inline (copied into the work request at post time; no send slot
  // and no DMA read of the payload). 0 when the device offers none.
  uint32_t max_inline() const { return max_inline_; }

  SendQueueCount sq;  // work requests posted and not retired

 private:
  QueuePair(Device& d, const QpShape& s) : sq(s.sq_depth, s.signal_every), device_(d), shape_(s) {}
  Device& device_;
  QpShape shape_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  int path_mtu_ = 0;
  uint32_t max_inline_ = 0;
  std::vector<std::byte> recv_, slots_;
  ibv_mr* recv_mr_ = nullptr;
  ibv_mr* slots_mr_ = nullptr;
  std::vector<int> free_slots_;
};

}  // namespace podnet::verbs
