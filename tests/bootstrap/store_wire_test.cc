// The decoder is the store's fuzz target: every mutation of a valid frame must decode to a
// frame, ask for more bytes, or be rejected — never crash or read past the buffer.
#include "bootstrap/store_wire.h"

#include <gtest/gtest.h>

#include <random>

namespace podnet::bootstrap::wire {
namespace {

using Kind = Decoded::Kind;

TEST(StoreWire, RoundTrip) {
  Frame f{Type::kCompareSet, 0, 42, 1, {"key", "old", std::string("new\0value", 9)}};
  std::string bytes = encode(f);
  ASSERT_EQ(bytes.substr(0, 4), "PDST");
  Decoded d = decode(bytes);
  ASSERT_EQ(d.kind, Kind::kFrame) << d.error.message();
  EXPECT_EQ(d.consumed, bytes.size());
  EXPECT_EQ(d.frame.type, Type::kCompareSet);
  EXPECT_EQ(d.frame.seq, 42u);
  EXPECT_EQ(d.frame.num, 1);
  EXPECT_EQ(d.frame.strs, f.strs);
}

TEST(StoreWire, EveryPrefixNeedsMore) {
  std::string bytes = encode({Type::kSet, 0, 7, 0, {"k", "v"}});
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_EQ(decode(std::string_view(bytes).substr(0, n)).kind, Kind::kNeedMore) << n;
}

TEST(StoreWire, RejectsBadFieldsBeforeThePayloadArrives) {
  EXPECT_TRUE(decode("GET / HTTP/1.1\r\n").bad_magic);
  EXPECT_TRUE(decode("X").bad_magic);  // one foreign byte is enough

  std::string bytes = encode({Type::kGet, 0, 1, 0, {"k"}});
  std::string v = bytes;
  v[4] = 9;  // version
  Decoded d = decode(std::string_view(v).substr(0, kHeaderSize));
  ASSERT_EQ(d.kind, Kind::kBad);
  EXPECT_EQ(d.peer_version, 9);
  EXPECT_NE(d.error.message().find("version 9"), std::string::npos);
  EXPECT_NE(d.error.message().find("version 1"), std::string::npos);

  std::string huge = bytes;
  huge[15] = '\x7f';  // payload length ~2 GiB: refused from the header alone
  EXPECT_EQ(decode(std::string_view(huge).substr(0, kHeaderSize)).kind, Kind::kBad);

  std::string flags = bytes;
  flags[7] = 1;
  EXPECT_EQ(decode(flags).kind, Kind::kBad);
  std::string type = bytes;
  type[6] = 99;
  EXPECT_EQ(decode(type).kind, Kind::kBad);
}

TEST(StoreWire, RejectsBadShapes) {
  EXPECT_EQ(decode(encode({Type::kGet, 0, 1, 0, {}})).kind, Kind::kBad);          // missing key
  EXPECT_EQ(decode(encode({Type::kGet, 0, 1, 0, {""}})).kind, Kind::kBad);        // empty key
  EXPECT_EQ(decode(encode({Type::kSet, 0, 1, 0, {"k"}})).kind, Kind::kBad);       // missing value
  EXPECT_EQ(decode(encode({Type::kGet, 0, 1, 5, {"k"}})).kind, Kind::kBad);       // num unused but set
  EXPECT_EQ(decode(encode({Type::kCompareSet, 0, 1, 2, {"k", "", "v"}})).kind, Kind::kBad);
  EXPECT_EQ(decode(encode({Type::kError, 0, 1, 0, {"msg"}})).kind, Kind::kBad);   // code kOk
  EXPECT_EQ(decode(encode({Type::kGet, 0, 1, 0, {std::string(kMaxKeyBytes + 1, 'k')}})).kind, Kind::kBad);
  std::string stray = encode({Type::kGet, 0, 1, 0, {"k"}});
  stray[12] = static_cast<char>(stray[12] + 1);  // payload one byte longer than its strings
  stray.push_back('x');
  EXPECT_EQ(decode(stray).kind, Kind::kBad);
}

TEST(StoreWire, MutationsNeverCrash) {
  std::mt19937 rng(12345);
  const std::vector<Frame> seeds = {
      {Type::kHello, 0, 1, 0, {}},          {Type::kSet, 0, 2, 0, {"key", "value"}},
      {Type::kWait, 0, 3, 0, {"a", "b"}},   {Type::kCompareSet, 0, 4, 1, {"k", "e", "d"}},
      {Type::kMissing, 0, 5, 0, {"x"}},     {Type::kError, 0, 6, 5, {"boom"}},
  };
  int frames = 0, bad = 0, more = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = encode(seeds[i % seeds.size()]);
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    Decoded d = decode(bytes);
    if (d.kind == Kind::kFrame) {
      ++frames;
      ASSERT_LE(d.consumed, bytes.size());
    } else if (d.kind == Kind::kBad) {
      ++bad;
      ASSERT_FALSE(d.error.ok());
    } else {
      ++more;
    }
  }
  EXPECT_GT(bad, 0);
  EXPECT_GT(frames + more, 0);
}

TEST(StoreWire, PrintableEscapesAndTruncates) {
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_NE(printable(std::string(500, 'k')).find("(500 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace podnet::bootstrap::wire
