// copy_to_output / stream_copy (src/base/copy.h): every byte arrives, at every alignment of
// source and destination, with heads and tails around the streamed lines; nothing outside
// the destination is written; the threshold picks the path.
#include "base/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace podnet {
namespace {

constexpr std::byte kGuard{0xA5};

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 2654435761u + seed) >> 13);
  return v;
}

// Copies `len` bytes from offset `so` of a source to offset `doff` of a guarded destination
// with `copy` and checks every byte of the destination buffer.
template <typename Copy>
void check(size_t len, size_t so, size_t doff, Copy&& copy) {
  const auto src = pattern(len + 64, static_cast<uint32_t>(len + so));
  std::vector<std::byte> dst(len + 128, kGuard);
  copy(dst.data() + doff, src.data() + so, len);
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= doff && i < doff + len;
    const std::byte want = inside ? src[so + i - doff] : kGuard;
    ASSERT_EQ(dst[i], want) << "len " << len << " src offset " << so << " dst offset " << doff << ": byte " << i
                            << (inside ? " of the copy" : " outside the destination");
  }
}

TEST(StreamCopy, EveryAlignmentAndLength) {
  const size_t lengths[] = {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 1000, 4096, 4096 + 77, 65536 + 3};
  for (size_t len : lengths)
    for (size_t so : {0, 1, 8, 16, 33, 63})
      for (size_t doff : {0, 1, 8, 16, 48, 63})
        check(len, so, doff, [](void* d, const void* s, size_t n) { stream_copy(d, s, n); });
}

TEST(StreamCopy, LargeCopyIsExact) {
  // Past the default threshold, through the public entry point with it given.
  check((9u << 20) + 13, 5, 3, [](void* d, const void* s, size_t n) { copy_to_output(d, s, n, 8u << 20); });
}

TEST(CopyToOutput, BelowAndAboveTheThresholdAndNever) {
  for (size_t stream_min : {size_t{0}, size_t{1}, size_t{100}, size_t{1} << 30})
    for (size_t len : {0, 7, 99, 100, 101, 5000})
      check(len, 3, 11, [stream_min](void* d, const void* s, size_t n) { copy_to_output(d, s, n, stream_min); });
}

TEST(CopyToOutput, ToItselfIsNothing) {
  auto v = pattern(4096, 7);
  const auto before = v;
  copy_to_output(v.data(), v.data(), v.size(), 1);
  EXPECT_EQ(v, before);
}

}  // namespace
}  // namespace podnet
