// Store wire protocol, shared by StoreServer and StoreClient (internal to src/bootstrap).
//
// Every frame is a 24-byte header followed by a payload, all integers little-endian:
//   off  0  u32 magic    0x54534450 ("PDST" as bytes)
//   off  4  u16 version  kVersion; a peer with another version is refused, naming both
//   off  6  u8  type     Type below
//   off  7  u8  flags    reserved, must be 0
//   off  8  u32 seq      request sequence number; a reply echoes its request's seq
//   off 12  u32 length   payload bytes (at most kMaxPayload)
//   off 16  i64 num      the type's integer (add delta, new value, cancelled seq, error code)
//   payload: u32 count, then count strings, each u32 length + bytes; nothing may follow.
// decode() is the only decoder: it checks every field (and each type's arity and sizes)
// before anything is used, so it is the fuzz target.
#pragma once

#include <podnet/status.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::bootstrap::wire {

inline constexpr uint32_t kMagic = 0x54534450;
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 24;
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = size_t{16} << 20;
inline constexpr size_t kMaxWaitKeys = 1024;
inline constexpr size_t kMaxErrorBytes = 4096;
// The largest request: compare_set with a key, an expected and a desired value.
inline constexpr size_t kMaxPayload = 4 + 3 * 4 + kMaxKeyBytes + 2 * kMaxValueBytes;

enum class Type : uint8_t {
  // Requests (client to server).
  kHello = 1,       // no strings; must be the first frame on a connection
  kSet = 2,         // [key, value]
  kGet = 3,         // [key]
  kWait = 4,        // [key...] (1..kMaxWaitKeys); replied to when every key exists
  kCancelWait = 5,  // num = seq of a pending wait; the wait is answered (Ok or Missing) first
  kAdd = 6,         // [key], num = delta
  kCompareSet = 7,  // [key, expected, desired], num = 1 if expected is given, 0 if the key must be absent
  kErase = 8,       // [key]
  // Replies (server to client).
  kOk = 64,         // no strings
  kValue = 65,      // [value]
  kNotFound = 66,   // no strings
  kInt = 67,        // num = the integer
  kMissing = 68,    // [key...]: a cancelled wait's keys that still do not exist
  kError = 69,      // [message], num = podnet::Code
};

std::string_view type_name(Type t) noexcept;
bool is_request(Type t) noexcept;

struct Frame {
  Type type = Type::kOk;
  uint8_t flags = 0;
  uint32_t seq = 0;
  int64_t num = 0;
  std::vector<std::string> strs;
};

// `version` is a parameter only so tests can speak another version.
std::string encode(const Frame& frame, uint16_t version = kVersion);

struct Decoded {
  enum class Kind { kNeedMore, kFrame, kBad };
  Kind kind = Kind::kNeedMore;
  size_t consumed = 0;     // kFrame: bytes the frame took from the buffer
  Frame frame;             // kFrame only
  Status error;            // kBad: what is wrong (code kProtocol)
  bool bad_magic = false;  // kBad: not our protocol at all (no point replying)
  uint16_t peer_version = 0;  // kBad: the version the peer spoke, when that was the problem
};
// Decodes the first frame in `buf`, which may hold a partial frame (kNeedMore).
Decoded decode(std::string_view buf);

// Keys in messages: non-printable bytes escaped, long ones cut, so garbage stays readable.
std::string printable(std::string_view s);
// "a, b, c" (at most 16 keys, then "and N more").
std::string join_keys(const std::vector<std::string>& keys);

}  // namespace podnet::bootstrap::wire
