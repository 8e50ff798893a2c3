#include "bootstrap/store_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace podnet::bootstrap::wire {
namespace {

void put_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view buf, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(buf[off + i])} << (8 * i);
  return v;
}

// Arity and size rules per type; the one place they are written down.
struct Shape {
  size_t min_strs, max_strs;
  size_t max_first;  // size limit of strs[0]
  size_t max_rest;   // size limit of every other string
  bool first_is_key; // strs[0] (and for kWait/kMissing every string) must be a non-empty key
  bool uses_num;
};

bool shape_of(Type t, Shape* s) {
  switch (t) {
    case Type::kHello:      *s = {0, 0, 0, 0, false, false}; return true;
    case Type::kSet:        *s = {2, 2, kMaxKeyBytes, kMaxValueBytes, true, false}; return true;
    case Type::kGet:        *s = {1, 1, kMaxKeyBytes, 0, true, false}; return true;
    case Type::kWait:       *s = {1, kMaxWaitKeys, kMaxKeyBytes, kMaxKeyBytes, true, false}; return true;
    case Type::kCancelWait: *s = {0, 0, 0, 0, false, true}; return true;
    case Type::kAdd:        *s = {1, 1, kMaxKeyBytes, 0, true, true}; return true;
    case Type::kCompareSet: *s = {3, 3, kMaxKeyBytes, kMaxValueBytes, true, true}; return true;
    case Type::kErase:      *s = {1, 1, kMaxKeyBytes, 0, true, false}; return true;
    case Type::kOk:         *s = {0, 0, 0, 0, false, false}; return true;
    case Type::kValue:      *s = {1, 1, kMaxValueBytes, 0, false, false}; return true;
    case Type::kNotFound:   *s = {0, 0, 0, 0, false, false}; return true;
    case Type::kInt:        *s = {0, 0, 0, 0, false, true}; return true;
    case Type::kMissing:    *s = {1, kMaxWaitKeys, kMaxKeyBytes, kMaxKeyBytes, true, false}; return true;
    case Type::kError:      *s = {1, 1, kMaxErrorBytes, 0, false, true}; return true;
  }
  return false;
}

Decoded bad(std::string message) {
  Decoded d;
  d.kind = Decoded::Kind::kBad;
  d.error = Status::Protocol("{}", message);
  return d;
}

// Checks the type-specific meaning of num once the shape is known to fit.
bool num_ok(const Frame& f) {
  switch (f.type) {
    case Type::kCancelWait: return f.num >= 0 && f.num <= UINT32_MAX;
    case Type::kCompareSet: return f.num == 0 || f.num == 1;
    case Type::kError:
      return f.num > static_cast<int>(Code::kOk) && f.num <= static_cast<int>(Code::kInternal);
    default: return true;
  }
}

}  // namespace

std::string_view type_name(Type t) noexcept {
  switch (t) {
    case Type::kHello: return "hello";
    case Type::kSet: return "set";
    case Type::kGet: return "get";
    case Type::kWait: return "wait";
    case Type::kCancelWait: return "cancel-wait";
    case Type::kAdd: return "add";
    case Type::kCompareSet: return "compare-set";
    case Type::kErase: return "erase";
    case Type::kOk: return "ok";
    case Type::kValue: return "value";
    case Type::kNotFound: return "not-found";
    case Type::kInt: return "int";
    case Type::kMissing: return "missing";
    case Type::kError: return "error";
  }
  return "unknown";
}

bool is_request(Type t) noexcept { return static_cast<uint8_t>(t) < static_cast<uint8_t>(Type::kOk); }

std::string encode(const Frame& frame, uint16_t version) {
  size_t payload = 4;
  for (const auto& s : frame.strs) payload += 4 + s.size();
  std::string out;
  out.reserve(kHeaderSize + payload);
  put_u32(out, kMagic);
  put_u16(out, version);
  out.push_back(static_cast<char>(frame.type));
  out.push_back(static_cast<char>(frame.flags));
  put_u32(out, frame.seq);
  put_u32(out, static_cast<uint32_t>(payload));
  put_u64(out, static_cast<uint64_t>(frame.num));
  put_u32(out, static_cast<uint32_t>(frame.strs.size()));
  for (const auto& s : frame.strs) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out += s;
  }
  return out;
}

Decoded decode(std::string_view buf) {
  // Reject foreign bytes as soon as the first of them arrives, not after a whole header.
  static constexpr char kMagicBytes[4] = {'P', 'D', 'S', 'T'};
  if (buf.empty()) return {};
  size_t have = std::min<size_t>(buf.size(), 4);
  if (std::memcmp(buf.data(), kMagicBytes, have) != 0) {
    std::string shown;
    for (size_t i = 0; i < have; ++i) shown += fmt::format("{:02x}", static_cast<uint8_t>(buf[i]));
    Decoded d = bad(fmt::format("bad magic 0x{} (not a podnet store peer)", shown));
    d.bad_magic = true;
    return d;
  }
  if (buf.size() < kHeaderSize) return {};
  auto version = static_cast<uint16_t>(get_le(buf, 4, 2));
  if (version != kVersion) {
    Decoded d = bad(fmt::format("protocol version mismatch: peer speaks version {}, this side speaks version {}",
                                version, kVersion));
    d.peer_version = version;
    return d;
  }
  Frame f;
  f.type = static_cast<Type>(static_cast<uint8_t>(buf[6]));
  f.flags = static_cast<uint8_t>(buf[7]);
  f.seq = static_cast<uint32_t>(get_le(buf, 8, 4));
  uint64_t length = get_le(buf, 12, 4);
  f.num = static_cast<int64_t>(get_le(buf, 16, 8));
  Shape shape;
  if (!shape_of(f.type, &shape)) return bad(fmt::format("unknown frame type {}", static_cast<int>(buf[6] & 0xff)));
  if (f.flags != 0) return bad(fmt::format("{} frame has reserved flags {:#x} set", type_name(f.type), f.flags));
  if (length < 4 || length > kMaxPayload)
    return bad(fmt::format("{} frame has payload length {} (allowed 4..{})", type_name(f.type), length, kMaxPayload));
  if (buf.size() < kHeaderSize + length) return {};

  std::string_view payload = buf.substr(kHeaderSize, length);
  uint64_t count = get_le(payload, 0, 4);
  if (count < shape.min_strs || count > shape.max_strs)
    return bad(fmt::format("{} frame has {} strings (allowed {}..{})", type_name(f.type), count, shape.min_strs,
                           shape.max_strs));
  size_t off = 4;
  f.strs.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (payload.size() - off < 4) return bad(fmt::format("{} frame: string {} runs past the payload", type_name(f.type), i));
    uint64_t len = get_le(payload, off, 4);
    off += 4;
    size_t limit = i == 0 ? shape.max_first : shape.max_rest;
    if (len > limit) return bad(fmt::format("{} frame: string {} is {} bytes (limit {})", type_name(f.type), i, len, limit));
    if (len > payload.size() - off)
      return bad(fmt::format("{} frame: string {} runs past the payload", type_name(f.type), i));
    bool must_be_key = shape.first_is_key && (i == 0 || f.type == Type::kWait || f.type == Type::kMissing);
    if (must_be_key && len == 0) return bad(fmt::format("{} frame: key {} is empty", type_name(f.type), i));
    f.strs.emplace_back(payload.substr(off, len));
    off += len;
  }
  if (off != payload.size())
    return bad(fmt::format("{} frame: {} stray bytes after the strings", type_name(f.type), payload.size() - off));
  if (!shape.uses_num && f.num != 0) return bad(fmt::format("{} frame has num {} (must be 0)", type_name(f.type), f.num));
  if (!num_ok(f)) return bad(fmt::format("{} frame has invalid num {}", type_name(f.type), f.num));
  if (f.type == Type::kCompareSet && f.num == 0 && !f.strs[1].empty())
    return bad("compare-set frame without an expected value carries one");

  Decoded d;
  d.kind = Decoded::Kind::kFrame;
  d.consumed = kHeaderSize + length;
  d.frame = std::move(f);
  return d;
}

std::string printable(std::string_view s) {
  static constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > kMaxShown) out += fmt::format("...({} bytes)", s.size());
  return out;
}

std::string join_keys(const std::vector<std::string>& keys) {
  static constexpr size_t kMaxListed = 16;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kMaxListed; ++i) {
    if (i > 0) out += ", ";
    out += printable(keys[i]);
  }
  if (keys.size() > kMaxListed) out += fmt::format(" and {} more", keys.size() - kMaxListed);
  return out;
}

}  // namespace podnet::bootstrap::wire
