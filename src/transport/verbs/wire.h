// What the verbs transport puts on the wire besides RDMA data:
//   - Hello: the connection-setup record exchanged over a TCP socket (the out-of-band
//     channel, which then stays open to notice a peer process that exits);
//   - Msg: the header of every two-sided message on a queue pair (in the receive buffers).
// One decoder per record validates every field before anything is used.
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <cstring>

namespace podnet::verbs {

inline constexpr uint32_t kHelloMagic = 0x50445642;  // "PDVB"
inline constexpr uint16_t kVersion = 2;       // 2: data lanes (several queue pairs per peer)
inline constexpr uint32_t kMaxLanes = 7;       // extra queue pairs per peer (PODNET_VERBS_QPS <= 8)

struct Hello {
  enum Kind : uint16_t { kHello = 1, kReply = 2, kRefuse = 3 };
  uint32_t magic = kHelloMagic;
  uint16_t version = kVersion;
  uint16_t kind = kHello;
  uint64_t ctx_id = 0;
  int32_t rank = -1;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t mtu = 0;         // ibv_mtu of the sender's port
  uint8_t gid[16] = {};
  uint32_t recv_depth = 0;  // receive buffers the sender posted for this queue pair
  uint32_t recv_size = 0;   // bytes each
  uint64_t beat_addr = 0;   // 8 bytes the peer may RDMA-write as a liveness probe
  uint32_t beat_rkey = 0;
  uint32_t max_rd_atom = 0;
  // Data lanes: extra RC queue pairs that carry only RDMA WRITE/READ chunks of large
  // transfers. A hello offers the sender's lanes; the reply accepts the smaller count and
  // names the lanes that connect to the first `lanes` offered, in order.
  uint32_t lanes = 0;
  uint32_t lane_qpn[kMaxLanes] = {};
  uint32_t lane_psn[kMaxLanes] = {};
  uint32_t reserved = 0;
  char why[64] = {};        // kRefuse: the reason
};
static_assert(sizeof(Hello) == 200);

inline Result<Hello> decode_hello(const void* data, size_t n) {
  if (n != sizeof(Hello)) return Status::Protocol("verbs hello of {} bytes (expected {})", n, sizeof(Hello));
  Hello h;
  std::memcpy(&h, data, sizeof h);
  if (h.magic != kHelloMagic) return Status::Protocol("verbs hello with bad magic {:#x}", h.magic);
  if (h.version != kVersion)
    return Status::Protocol("peer speaks verbs protocol version {}, this podnet speaks {}", h.version, kVersion);
  if (h.kind < Hello::kHello || h.kind > Hello::kRefuse) return Status::Protocol("verbs hello of kind {}", h.kind);
  if (h.kind != Hello::kRefuse && (h.qpn == 0 || h.qpn > 0xFFFFFF || h.mtu < 1 || h.mtu > 5 || h.recv_depth == 0))
    return Status::Protocol("verbs hello with bad fields (qpn {:#x}, mtu {}, receive depth {})", h.qpn, h.mtu,
                            h.recv_depth);
  if (h.kind != Hello::kRefuse) {
    if (h.lanes > kMaxLanes) return Status::Protocol("verbs hello with {} data lanes (at most {})", h.lanes, kMaxLanes);
    for (uint32_t i = 0; i < h.lanes; ++i)
      if (h.lane_qpn[i] == 0 || h.lane_qpn[i] > 0xFFFFFF)
        return Status::Protocol("verbs hello with bad data lane {} (qpn {:#x})", i, h.lane_qpn[i]);
  }
  h.why[sizeof h.why - 1] = '\0';
  return h;
}

// Requests travel on the sender's own queue pair and use one of the peer's receive credits;
// replies travel back on the peer's queue pair (see endpoint.h).
enum class MsgType : uint8_t {
  kEager = 1,     // request: tag, len bytes of payload follow the header
  kRts,           // request: rendezvous announcement: tag, id, addr/size/rkey of the source
  kResolve,       // request: what is the rkey of podnet key `tag`?
  kNotify,        // request: write_notify immediate that does not fit 32 bits (after the write)
  kFin,           // reply: rendezvous id was pulled (status 0) or refused (status 1: too large)
  kResolveReply,  // reply: key `tag` is region addr/size with access and rkey (status 0) or unknown
  kCredit,        // reply: only returns credits
  kRevoke,        // reply: key `tag` was deregistered; forget its rkey
};

struct Msg {
  MsgType type = MsgType::kCredit;
  uint8_t status = 0;
  uint16_t credits = 0;  // receive buffers the sender re-posted since its last report
  uint32_t len = 0;      // eager payload bytes after the header
  uint64_t tag = 0;      // eager/rts: tag; notify: immediate; resolve/reply/revoke: podnet key
  uint64_t id = 0;       // rts/fin: message id
  uint64_t addr = 0;     // rts: source address; reply: region base
  uint64_t size = 0;     // rts: bytes; reply: region length
  uint32_t rkey = 0;     // rts, reply
  uint32_t access = 0;   // reply: podnet Access bits
};
static_assert(sizeof(Msg) == 48);

inline Result<Msg> decode_msg(const void* data, size_t n, bool on_request_qp) {
  if (n < sizeof(Msg)) return Status::Protocol("verbs message of {} bytes (header is {})", n, sizeof(Msg));
  Msg m;
  std::memcpy(&m, data, sizeof m);
  auto t = static_cast<uint8_t>(m.type);
  if (t < 1 || t > static_cast<uint8_t>(MsgType::kRevoke)) return Status::Protocol("verbs message of type {}", t);
  bool request = m.type <= MsgType::kNotify;
  if (request != on_request_qp)
    return Status::Protocol("verbs message of type {} on the wrong queue pair", t);
  if (m.type == MsgType::kEager ? m.len != n - sizeof(Msg) : n != sizeof(Msg))
    return Status::Protocol("verbs message of type {}: {} bytes with payload length {}", t, n, m.len);
  if (m.access > 3) return Status::Protocol("verbs message with access bits {:#x}", m.access);
  return m;
}

}  // namespace podnet::verbs
