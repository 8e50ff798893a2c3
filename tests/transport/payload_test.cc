// Payload: an unexpected eager message's bytes. Large buffers are reused from a pool (fresh
// pages cost a fault each while recv() copies into them), never handed out twice; the
// bytes and the size are what was assigned.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "transport/matcher.h"

namespace podnet::detail {
namespace {

TEST(Payload, AssignKeepsTheBytesAndTheSize) {
  std::vector<std::byte> src(100'000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7);
  Payload p;
  p.assign(src.data(), src.data() + src.size());
  ASSERT_EQ(p.size(), src.size());
  EXPECT_EQ(std::memcmp(p.data(), src.data(), src.size()), 0);
  p.assign(src.data(), src.data());
  EXPECT_EQ(p.size(), 0u);
}

TEST(Payload, ALargeBufferIsReusedAfterItsPayloadIsGone) {
  std::byte* first = nullptr;
  {
    Payload p;
    p.resize(256 * 1024);
    first = p.data();
    std::memset(first, 1, p.size());
  }
  Payload q;
  q.resize(200 * 1024);  // fits the pooled buffer
  EXPECT_EQ(q.data(), first);
  EXPECT_EQ(q.size(), 200u * 1024);
}

TEST(Payload, APooledBufferIsNotHandedOutTwice) {
  std::byte* a_buf = nullptr;
  {
    Payload a;
    a.resize(Payload::kPoolMin);
    a_buf = a.data();
  }
  Payload b, c;
  b.resize(Payload::kPoolMin);
  c.resize(Payload::kPoolMin);
  EXPECT_NE(b.data(), c.data());
  EXPECT_TRUE(b.data() == a_buf || c.data() == a_buf);
}

TEST(Payload, ShrinkingKeepsTheBuffer) {
  Payload p;
  p.resize(Payload::kPoolMin);
  std::byte* buf = p.data();
  p.resize(Payload::kPoolMin / 2);
  EXPECT_EQ(p.data(), buf);
  EXPECT_EQ(p.size(), Payload::kPoolMin / 2);
}

}  // namespace
}  // namespace podnet::detail
