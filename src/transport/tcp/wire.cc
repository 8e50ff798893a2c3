#include "transport/tcp/wire.h"

namespace podnet::tcp {

std::string_view frame_type_name(FrameType t) noexcept {
  switch (t) {
    case FrameType::kHello: return "hello";
    case FrameType::kHelloAck: return "hello-ack";
    case FrameType::kWrite: return "write";
    case FrameType::kWriteImm: return "write-imm";
    case FrameType::kWriteAck: return "write-ack";
    case FrameType::kReadReq: return "read-req";
    case FrameType::kReadResp: return "read-resp";
    case FrameType::kSend: return "send";
    case FrameType::kRts: return "rts";
    case FrameType::kCts: return "cts";
    case FrameType::kRdvData: return "rdv-data";
    case FrameType::kHeartbeat: return "heartbeat";
    case FrameType::kBye: return "bye";
    case FrameType::kError: return "error";
  }
  return "?";
}

Result<FrameHeader> decode_header(const std::byte* in) {
  FrameHeader h;
  std::memcpy(&h, in, kHeaderSize);
  if (h.magic != kMagic) return Status::Protocol("bad frame magic {:#010x} (not a podnet peer?)", h.magic);
  if (h.version != kWireVersion)
    return Status::Protocol("peer speaks podnet wire version {}, this podnet speaks version {}", h.version,
                            kWireVersion);
  auto t = static_cast<uint8_t>(h.type);
  if (t < static_cast<uint8_t>(FrameType::kHello) || t > static_cast<uint8_t>(FrameType::kLast))
    return Status::Protocol("unknown frame type {}", t);
  const bool order_only = h.flags == kFlagOrderOnly && h.type == FrameType::kWriteImm && h.length == 0;
  if ((h.flags != 0 && !order_only) || (h.aux != 0 && h.type != FrameType::kWriteImm))
    return Status::Protocol("reserved header bits set in {} frame", frame_type_name(h.type));
  if (h.status > static_cast<uint32_t>(Code::kInternal)) return Status::Protocol("bad status code {}", h.status);
  uint64_t max = kMaxControlPayload;
  switch (h.type) {
    case FrameType::kWrite: case FrameType::kWriteImm: case FrameType::kReadResp:
    case FrameType::kSend: case FrameType::kRdvData:
      max = kMaxPayload;
      break;
    case FrameType::kHelloAck: case FrameType::kReadReq: case FrameType::kRts:
    case FrameType::kHeartbeat: case FrameType::kBye:
      max = 0;
      break;
    default:
      break;
  }
  if (h.length > max)
    return Status::Protocol("{} frame with {} payload bytes (at most {})", frame_type_name(h.type), h.length, max);
  if (h.type == FrameType::kReadReq && h.c > kMaxPayload)
    return Status::Protocol("read request of {} bytes (at most {})", h.c, kMaxPayload);
  return h;
}

std::string encode_hello(const HelloBody& h) {
  std::string out(16, '\0');
  std::memcpy(out.data(), &h.ctx_id, 8);
  std::memcpy(out.data() + 8, &h.rank, 4);
  std::memcpy(out.data() + 12, &h.stream, 2);
  std::memcpy(out.data() + 14, &h.nstreams, 2);
  out += h.listen;
  return out;
}

Result<HelloBody> decode_hello(std::string_view p) {
  if (p.size() < 16 || p.size() > 16 + 255) return Status::Protocol("hello body of {} bytes", p.size());
  HelloBody h;
  std::memcpy(&h.ctx_id, p.data(), 8);
  std::memcpy(&h.rank, p.data() + 8, 4);
  std::memcpy(&h.stream, p.data() + 12, 2);
  std::memcpy(&h.nstreams, p.data() + 14, 2);
  if (h.nstreams == 0 || h.nstreams > 64 || h.stream >= h.nstreams)
    return Status::Protocol("hello with stream {} of {}", h.stream, h.nstreams);
  if (h.rank < -1) return Status::Protocol("hello with rank {}", h.rank);
  h.listen.assign(p.substr(16));
  for (char ch : h.listen)
    if (ch < 0x20 || ch > 0x7e) return Status::Protocol("hello with a non-printable listen address");
  return h;
}

}  // namespace podnet::tcp
