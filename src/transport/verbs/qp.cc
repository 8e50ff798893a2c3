#include "transport/verbs/qp.h"

#include <cerrno>
#include <cstring>
#include <random>

namespace podnet::verbs {

Result<std::unique_ptr<QueuePair>> QueuePair::create(Device& d, ibv_cq* cq, const QpShape& shape) {
  std::unique_ptr<QueuePair> q(new QueuePair(d, shape));
  q->recv_.resize(size_t(shape.recv_depth) * shape.recv_size);
  q->slots_.resize(size_t(shape.send_slots) * shape.slot_size);
  // An int, not the enumerator: ibv_reg_mr is a macro that ANDs it with another enum's constant
  // (IBV_ACCESS_OPTIONAL_RANGE), which clang rejects (-Wdeprecated-enum-enum-conversion).
  q->recv_mr_ = ibv_reg_mr(d.pd, q->recv_.data(), q->recv_.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  q->slots_mr_ = ibv_reg_mr(d.pd, q->slots_.data(), q->slots_.size(), 0);
  if (q->recv_mr_ == nullptr || q->slots_mr_ == nullptr)
    return Status::Unavailable("{}: ibv_reg_mr of the queue pair's buffers: {} (check `ulimit -l`)", d.name,
                               std::strerror(errno));
  for (int i = shape.send_slots - 1; i >= 0; --i) q->free_slots_.push_back(i);

  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = static_cast<uint32_t>(shape.sq_depth);
  ia.cap.max_recv_wr = static_cast<uint32_t>(shape.recv_depth);
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = shape.inline_bytes;
  q->qp_ = ibv_create_qp(d.pd, &ia);
  if (q->qp_ == nullptr && shape.inline_bytes > 0) {  // a device without inline sends: without
    ia.cap.max_inline_data = 0;
    q->qp_ = ibv_create_qp(d.pd, &ia);
  }
  if (q->qp_ == nullptr)
    return Status::Unavailable("{}: ibv_create_qp (send depth {}, receive depth {}): {}", d.name, shape.sq_depth,
                               shape.recv_depth, std::strerror(errno));
  q->max_inline_ = std::min<uint32_t>(ia.cap.max_inline_data, shape.inline_bytes);
  static thread_local std::mt19937 rng{std::random_device{}()};
  q->psn_ = rng() & 0xFFFFFF;

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(d.port);
  // What the peer may do is decided per region by its MR; the QP allows both.
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(q->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return Status::Unavailable("{}: queue pair to INIT: {}", d.name, std::strerror(rc));
  for (int i = 0; i < shape.recv_depth; ++i) PODNET_RETURN_IF_ERROR(q->post_recv(static_cast<uint32_t>(i)));
  return q;
}

QueuePair::~QueuePair() {
  if (qp_) ibv_destroy_qp(qp_);
  if (recv_mr_) ibv_dereg_mr(recv_mr_);
  if (slots_mr_) ibv_dereg_mr(slots_mr_);
}

Status QueuePair::post_recv(uint32_t i) {
  ibv_sge sge{reinterpret_cast<uint64_t>(recv_buffer(i)), shape_.recv_size, recv_mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(WrKind::kRecv, i, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad)) return Status::PeerFailed("ibv_post_recv: {}", std::strerror(rc));
  return {};
}

int QueuePair::take_slot() {
  if (free_slots_.empty()) return -1;
  int s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

Status QueuePair::connect(const Hello& peer, const VerbsOptions& o) {
  int rd_atom = std::max(1, std::min({16, device_.max_rd_atom, static_cast<int>(peer.max_rd_atom)}));
  path_mtu_ = std::min(static_cast<int>(device_.port_attr.active_mtu), static_cast<int>(peer.mtu));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(path_mtu_);
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(rd_atom);
  a.min_rnr_timer = 12;  // 0.64 ms
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = static_cast<uint8_t>(device_.port);
  if (int rc = ibv_modify_qp(qp_, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return Status::Unavailable("{}: queue pair to RTR (peer QP {:#x}, GID {}): {}", device_.name, peer.qpn,
                               gid_text(a.ah_attr.grh.dgid), std::strerror(rc));
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = static_cast<uint8_t>(o.ack_timeout);
  r.retry_cnt = static_cast<uint8_t>(o.retry_count);
  r.rnr_retry = 7;  // infinite: credits keep receive buffers available; this only rides out a hiccup
  r.sq_psn = psn_;
  r.max_rd_atomic = static_cast<uint8_t>(rd_atom);
  if (int rc = ibv_modify_qp(qp_, &r,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return Status::Unavailable("{}: queue pair to RTS: {}", device_.name, std::strerror(rc));
  return {};
}

}  // namespace podnet::verbs
