// The TCP frame decoder validates every field; it is also the fuzz target.
#include <gtest/gtest.h>

#include <random>

#include "transport/tcp/wire.h"

namespace podnet::tcp {
namespace {

std::array<std::byte, kHeaderSize> encode(const FrameHeader& h) {
  std::array<std::byte, kHeaderSize> b;
  encode_header(h, b.data());
  return b;
}

TEST(Wire, RoundTrip) {
  FrameHeader h;
  h.type = FrameType::kWriteImm;
  h.length = 12345;
  h.seq = 7;
  h.a = 1;
  h.b = 2;
  h.c = 3;
  auto d = decode_header(encode(h).data());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->type, FrameType::kWriteImm);
  EXPECT_EQ(d->length, 12345u);
  EXPECT_EQ(d->c, 3u);
}

TEST(Wire, VersionMismatchNamesBothVersions) {
  FrameHeader h;
  h.version = kWireVersion + 1;
  auto d = decode_header(encode(h).data());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kProtocol);
  EXPECT_NE(d.status().message().find(fmt::format("version {}", kWireVersion + 1)), std::string::npos);
  EXPECT_NE(d.status().message().find(fmt::format("version {}", kWireVersion)), std::string::npos);
}

TEST(Wire, RejectsBadFields) {
  FrameHeader h;
  h.magic = 0x12345678;
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.type = static_cast<FrameType>(99);
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.aux = 1;  // only write-imm frames carry it
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.type = FrameType::kHeartbeat;
  h.length = 1;  // heartbeats carry nothing
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.type = FrameType::kError;
  h.length = kMaxControlPayload + 1;
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.type = FrameType::kSend;
  h.length = kMaxPayload + 1;
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h = FrameHeader{};
  h.status = 1000;
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
}

TEST(Wire, TheOrderOnlyFlagIsLegalOnlyOnAnEmptyWriteImm) {
  FrameHeader h;
  h.type = FrameType::kWriteImm;
  h.flags = kFlagOrderOnly;
  h.aux = 7;
  auto d = decode_header(encode(h).data());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->flags, kFlagOrderOnly);
  EXPECT_EQ(d->aux, 7u);
  h.length = 1;  // it carries no data
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h.length = 0;
  h.type = FrameType::kWrite;  // nor does any other frame carry it
  h.aux = 0;
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
  h.type = FrameType::kWriteImm;
  h.flags = 2;  // the other bits stay reserved
  EXPECT_FALSE(decode_header(encode(h).data()).ok());
}

TEST(Wire, RandomBytesNeverCrashAndRarelyPass) {
  std::mt19937_64 rng(42);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    std::array<std::byte, kHeaderSize> b;
    for (auto& x : b) x = static_cast<std::byte>(rng());
    accepted += decode_header(b.data()).ok();
  }
  EXPECT_EQ(accepted, 0);
}

TEST(Wire, HelloValidation) {
  HelloBody h{0xabc, 3, 1, 4, "127.0.0.1:5000"};
  auto d = decode_hello(encode_hello(h));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ctx_id, 0xabcu);
  EXPECT_EQ(d->listen, "127.0.0.1:5000");
  h.stream = 4;  // stream index out of range
  EXPECT_FALSE(decode_hello(encode_hello(h)).ok());
  EXPECT_FALSE(decode_hello("short").ok());
}

// Striped chunks end on a segment boundary: no tiny last segment per chunk.
TEST(Wire, ChunksAreWholeSegmentsWithTheirHeader) {
  // Loopback's MSS: 512 KiB chunks become 8 full segments with the 64-byte header.
  EXPECT_EQ(whole_segments(512 << 10, 65483), 8u * 65483 - kHeaderSize);
  // Ethernet with timestamps: at most one segment less than asked for, and whole segments.
  const uint64_t eth = whole_segments(512 << 10, 1448);
  EXPECT_EQ((eth + kHeaderSize) % 1448, 0u);
  EXPECT_LE(eth, 512u << 10);
  EXPECT_GT(eth + 1448, 512u << 10);
  // Already whole: unchanged.
  EXPECT_EQ(whole_segments(2 * 1448 - kHeaderSize, 1448), 2u * 1448 - kHeaderSize);
  // Smaller than one segment, or the MSS unknown: unchanged.
  EXPECT_EQ(whole_segments(1000, 65483), 1000u);
  EXPECT_EQ(whole_segments(512 << 10, 0), 512u << 10);
  EXPECT_EQ(whole_segments(512 << 10, kHeaderSize), 512u << 10);
}

// Below the striping size a transfer whose frame would end a little into a second segment
// goes as the fewest even frames that each fit one segment.
TEST(Wire, MidSizeTransfersSplitIntoFramesThatFitASegment) {
  const uint32_t lo = 65483;  // loopback
  // Fits one segment with its header: one frame.
  EXPECT_EQ(single_segment_chunks(lo - kHeaderSize, lo), lo - kHeaderSize);
  EXPECT_EQ(single_segment_chunks(1000, lo), 1000u);
  // 64 KiB: two frames of 32 KiB (not 65 419 + 117 bytes).
  EXPECT_EQ(single_segment_chunks(64 << 10, lo), 32u << 10);
  // One byte over a segment: two frames, each fitting.
  EXPECT_EQ(single_segment_chunks(lo - kHeaderSize + 1, lo), (lo - kHeaderSize + 2) / 2);
  // Every split: the fewest frames, each with its header within one segment, covering all.
  for (uint32_t mss : {kSplitMinMss, 65483u})
    for (uint64_t len : {uint64_t{mss}, uint64_t{3} * mss + 5, uint64_t{200003}, uint64_t{262143}}) {
      const uint64_t cs = single_segment_chunks(len, mss), n = (len + cs - 1) / cs;
      EXPECT_LE(cs + kHeaderSize, mss) << len << " at MSS " << mss;
      EXPECT_GE(n * cs, len);
      EXPECT_LT((n - 1) * (mss - kHeaderSize), len) << "more frames than needed: " << len << " at MSS " << mss;
    }
  // Ethernet-sized segments (a partial last one is cheap there), or the MSS unknown: unchanged.
  EXPECT_EQ(single_segment_chunks(64 << 10, 1448), 64u << 10);
  EXPECT_EQ(single_segment_chunks(64 << 10, 8948), 64u << 10);
  EXPECT_EQ(single_segment_chunks(64 << 10, 0), 64u << 10);
}

}  // namespace
}  // namespace podnet::tcp
