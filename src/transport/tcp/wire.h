// The TCP transport's wire protocol. Every frame is a fixed 64-byte header, then `length`
// payload bytes. decode_header() validates every field before anything uses it; it is the
// fuzz target. Integers are little-endian (the hosts podnet runs on).
//
//  type        a            b              c          payload
//  kHello      ctx id       rank           stream     HelloBody (peer's identity)
//  kHelloAck   ctx id       rank           -          -
//  kWrite      key          remote addr    -          data
//  kWriteImm   key          remote addr    imm        data (aux: notification number;
//                                                     flags kFlagOrderOnly: none, no data)
//  kWriteAck   -            -              -          error text when status != 0
//  kReadReq    key          remote addr    length     -
//  kReadResp   -            -              -          data, or error text when status != 0
//  kSend       tag          -              -          data (eager message)
//  kRts        tag          message id     length     - (rendezvous: ready to send)
//  kCts        message id   receive token  -          error text when status != 0
//  kRdvData    receive tok  offset         -          data
//  kHeartbeat  -            -              -          -
//  kBye        -            -              -          - (graceful close)
//  kError      -            -              -          text (fatal; the sender closes)
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace podnet::tcp {

inline constexpr uint32_t kMagic = 0x544E4450;  // "PDNT"
inline constexpr uint16_t kWireVersion = 3;
inline constexpr size_t kHeaderSize = 64;
inline constexpr uint64_t kMaxPayload = 1ull << 32;  // 4 GiB per frame
inline constexpr uint64_t kMaxControlPayload = 4096;  // hello, error texts

enum class FrameType : uint8_t {
  kHello = 1, kHelloAck, kWrite, kWriteImm, kWriteAck, kReadReq, kReadResp,
  kSend, kRts, kCts, kRdvData, kHeartbeat, kBye, kError,
  kLast = kError,
};
std::string_view frame_type_name(FrameType t) noexcept;

// FrameHeader::flags. The only flag: a write-imm without payload that uses up its
// notification number (aux) and delivers nothing, sent when the striped write it belonged
// to was refused (the target holds later notifications until every earlier number came).
inline constexpr uint8_t kFlagOrderOnly = 1;

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kWireVersion;
  FrameType type = FrameType::kHeartbeat;
  uint8_t flags = 0;
  uint32_t status = 0;  // a podnet::Code for replies
  uint32_t aux = 0;     // write-imm: the initiator's notification number; else 0
  uint64_t length = 0;  // payload bytes that follow
  uint64_t seq = 0;     // the initiator's chunk id, echoed by replies
  uint64_t a = 0, b = 0, c = 0, d = 0;
};
static_assert(sizeof(FrameHeader) == kHeaderSize);

inline void encode_header(const FrameHeader& h, std::byte* out) { std::memcpy(out, &h, kHeaderSize); }

// Validates magic, version, type, reserved bits and the payload bound for the type.
// A version mismatch is kProtocol with both versions in the message.
Result<FrameHeader> decode_header(const std::byte* in);

// `chunk` rounded down so that a frame of it (header + chunk) is a whole number of segments
// of `mss` bytes; unchanged when the frame is smaller than one segment or mss is unknown.
inline uint64_t whole_segments(uint64_t chunk, uint32_t mss) {
  if (mss <= kHeaderSize || chunk + kHeaderSize < mss) return chunk;
  return (chunk + kHeaderSize) / mss * mss - kHeaderSize;
}

// The chunk size for a transfer of `len` bytes below the striping size: `len` itself when
// its frame fits one segment of `mss`, else the even split into the fewest frames that each
// fit one segment. Loopback TCP (MSS 65 483) moves a frame that ends a little into its last
// segment at a quarter to a half of the rate of one that fits a segment (docs/performance.md):
// a 64 KiB write is two frames of 32 KiB, not 65 419 + 117 bytes. Only for segments of at
// least kSplitMinMss: on Ethernet (1 448) the last partial segment of a frame costs nothing
// special, while every extra frame costs a header and an acknowledgement.
inline constexpr uint32_t kSplitMinMss = 32 * 1024;
inline uint64_t single_segment_chunks(uint64_t len, uint32_t mss) {
  if (mss < kSplitMinMss || len + kHeaderSize <= mss) return len;
  const uint64_t room = mss - kHeaderSize, n = (len + room - 1) / room;
  return (len + n - 1) / n;
}

// The identity an initiator sends in kHello.
struct HelloBody {
  uint64_t ctx_id = 0;
  int32_t rank = -1;
  uint16_t stream = 0;
  uint16_t nstreams = 1;
  std::string listen;  // "host:port" of the initiator's listener, for error messages
};
std::string encode_hello(const HelloBody& h);
Result<HelloBody> decode_hello(std::string_view payload);

}  // namespace podnet::tcp
