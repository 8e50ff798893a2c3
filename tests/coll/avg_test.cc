// finalize_avg: integer truncation toward zero, one correctly rounded division for floats,
// and the reduce-then-finalize sequence a collective runs.
#include "coll/half.h"
#include "coll/reduce_kernels.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace podnet::coll {
namespace {

template <typename T>
T avg_of(DataType t, T sum, int nranks) {
  finalize_avg(t, &sum, 1, nranks);
  return sum;
}

TEST(FinalizeAvgTest, IntegersTruncateTowardZero) {
  EXPECT_EQ(avg_of<int32_t>(DataType::kInt32, 7, 2), 3);
  EXPECT_EQ(avg_of<int32_t>(DataType::kInt32, -7, 2), -3);
  EXPECT_EQ(avg_of<int8_t>(DataType::kInt8, -128, 3), -42);
  EXPECT_EQ(avg_of<uint8_t>(DataType::kUint8, 250, 7), 35);
  EXPECT_EQ(avg_of<uint8_t>(DataType::kUint8, 255, 300), 0);  // more ranks than the type holds
  EXPECT_EQ(avg_of<int8_t>(DataType::kInt8, 100, 300), 0);
  EXPECT_EQ(avg_of<int64_t>(DataType::kInt64, std::numeric_limits<int64_t>::min(), 2),
            std::numeric_limits<int64_t>::min() / 2);
  EXPECT_EQ(avg_of<uint64_t>(DataType::kUint64, std::numeric_limits<uint64_t>::max(), 3),
            std::numeric_limits<uint64_t>::max() / 3);
  EXPECT_EQ(avg_of<uint32_t>(DataType::kUint32, 4000000000u, 1), 4000000000u);
}

template <typename T>
void check_random_ints(DataType t) {
  std::mt19937_64 rng(static_cast<uint64_t>(t));
  for (int nranks : {1, 2, 3, 7, 8, 300, 4096}) {
    std::vector<T> buf(1000), want(1000);
    for (size_t i = 0; i < buf.size(); ++i) {
      buf[i] = static_cast<T>(rng());
      want[i] = static_cast<T>(static_cast<__int128>(buf[i]) / nranks);
    }
    finalize_avg(t, buf.data(), buf.size(), nranks);
    EXPECT_EQ(buf, want) << dtype_name(t) << " nranks " << nranks;
  }
}

TEST(FinalizeAvgTest, RandomIntegers) {
  check_random_ints<int8_t>(DataType::kInt8);
  check_random_ints<uint8_t>(DataType::kUint8);
  check_random_ints<int32_t>(DataType::kInt32);
  check_random_ints<uint32_t>(DataType::kUint32);
  check_random_ints<int64_t>(DataType::kInt64);
  check_random_ints<uint64_t>(DataType::kUint64);
}

TEST(FinalizeAvgTest, FloatsDivideOnce) {
  // x / 3 and x * (1/3) differ in the last bit for some x; finalize_avg must divide.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  int differs = 0;
  for (int i = 0; i < 10000; ++i) {
    float f = dist(rng);
    const double d = static_cast<double>(dist(rng)) * 1e-3;
    differs += (f / 3.0f != f * (1.0f / 3.0f));
    EXPECT_EQ(std::bit_cast<uint32_t>(avg_of<float>(DataType::kFloat32, f, 3)),
              std::bit_cast<uint32_t>(f / 3.0f));
    EXPECT_EQ(std::bit_cast<uint64_t>(avg_of<double>(DataType::kFloat64, d, 7)),
              std::bit_cast<uint64_t>(d / 7.0));
  }
  EXPECT_GT(differs, 0);  // the test can tell a division from a multiply
  EXPECT_TRUE(std::isnan(avg_of<float>(DataType::kFloat32, NAN, 4)));
  EXPECT_EQ(avg_of<float>(DataType::kFloat32, -INFINITY, 4), -INFINITY);
}

TEST(FinalizeAvgTest, HalvesDivideInFloatAndRoundOnce) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto code = static_cast<uint16_t>(h);
    for (int n : {2, 3, 10}) {
      const uint16_t half = avg_of<uint16_t>(DataType::kFloat16, code, n);
      const float nf = static_cast<float>(n);
      ASSERT_EQ(half, ref::float_to_half(ref::half_to_float(code) / nf))
          << std::hex << h << " / " << n;
      const uint16_t bf = avg_of<uint16_t>(DataType::kBfloat16, code, n);
      ASSERT_EQ(bf, ref::float_to_bf16(ref::bf16_to_float(code) / nf))
          << std::hex << h << " / " << n;
    }
  }
}

// What an allreduce(avg) does on one rank: fold in each peer's buffer, then finalize.
TEST(FinalizeAvgTest, ReduceThenFinalize) {
  std::vector<int32_t> acc{1, -1, 10, 7};
  const std::vector<int32_t> r1{2, -2, 20, 0}, r2{4, -4, 31, 0};
  reduce(ReduceOp::kAvg, DataType::kInt32, acc.data(), r1.data(), acc.size());
  reduce(ReduceOp::kAvg, DataType::kInt32, acc.data(), r2.data(), acc.size());
  EXPECT_EQ(acc, (std::vector<int32_t>{7, -7, 61, 7}));  // avg is a sum until finalized
  finalize_avg(DataType::kInt32, acc.data(), acc.size(), 3);
  EXPECT_EQ(acc, (std::vector<int32_t>{2, -2, 20, 2}));

  std::vector<uint16_t> h{float_to_half(1.0f)}, h1{float_to_half(2.0f)}, h2{float_to_half(4.0f)};
  reduce(ReduceOp::kAvg, DataType::kFloat16, h.data(), h1.data(), 1);
  reduce(ReduceOp::kAvg, DataType::kFloat16, h.data(), h2.data(), 1);
  finalize_avg(DataType::kFloat16, h.data(), 1, 3);
  EXPECT_EQ(h[0], float_to_half(7.0f / 3.0f));
}

TEST(FinalizeAvgTest, EmptyAndSingleRank) {
  finalize_avg(DataType::kFloat32, nullptr, 0, 4);
  float x = 5.0f;
  finalize_avg(DataType::kFloat32, &x, 1, 1);
  EXPECT_EQ(x, 5.0f);
}

}  // namespace
}  // namespace podnet::coll
