// float16 / bfloat16 conversions: exhaustive where the space is small (every 16-bit code,
// every rounding midpoint), random elsewhere, always against the search-based reference.
#include "coll/half.h"

#include "coll/reduce_kernels.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace podnet::coll {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(HalfTest, EveryCodeWidensExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto code = static_cast<uint16_t>(h);
    ASSERT_EQ(bits(half_to_float(code)), bits(ref::half_to_float(code))) << std::hex << h;
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (!nan) ASSERT_EQ(float_to_half(half_to_float(code)), code) << std::hex << h;
    else ASSERT_EQ(float_to_half(half_to_float(code)), code | 0x200) << std::hex << h;
  }
}

// Every midpoint between neighbouring float16 values is a float; it must go to the even
// code, and the floats just either side of it to the nearer code.
TEST(HalfTest, MidpointsRoundToEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const double s = sign ? -1.0 : 1.0;
      const auto mid = static_cast<float>(s * (ref::half_value(h) + ref::half_value(h + 1)) / 2);
      const auto even = static_cast<uint16_t>(sign | ((h & 1) ? h + 1 : h));
      ASSERT_EQ(float_to_half(mid), even) << std::hex << h;
      const float toward_zero = std::nextafter(mid, 0.0f);
      const float away = std::nextafter(mid, sign ? -INFINITY : INFINITY);
      ASSERT_EQ(float_to_half(toward_zero), sign | h) << std::hex << h;
      ASSERT_EQ(float_to_half(away), sign | (h + 1)) << std::hex << h;
    }
  }
}

TEST(HalfTest, SpecialValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);              // largest finite
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);            // just under the midpoint to inf
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);              // the midpoint: ties to inf (even)
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);              // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);              // half of it: ties to even (zero)
  EXPECT_EQ(float_to_half(0x1.000002p-25f), 0x0001);       // above half: rounds up
  EXPECT_EQ(float_to_half(0x1.ffcp-15f), 0x0400);          // subnormal tie carries into the normals
  EXPECT_EQ(float_to_half(0x1p-149f), 0x0000);             // float subnormal: too small
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0x7f800001u)), 0x7e00);  // signalling: quiet
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0xffc02000u)), 0xfe01);  // sign and payload
  EXPECT_EQ(bits(half_to_float(0x0001)), bits(0x1p-24f));
  EXPECT_EQ(bits(half_to_float(0x7c00)), bits(INFINITY));
  EXPECT_EQ(bits(half_to_float(0x7c01)), 0x7fc02000u);     // NaN widened and made quiet
}

TEST(HalfTest, RandomFloatsMatchReference) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> scaled(-70000.0f, 70000.0f);
  for (int i = 0; i < 300000; ++i) {
    const uint32_t raw = rng();
    const float f = (i % 2) ? std::bit_cast<float>(raw)
                            : scaled(rng) * std::ldexp(1.0f, -static_cast<int>(raw % 40));
    ASSERT_EQ(float_to_half(f), ref::float_to_half(f)) << std::hex << bits(f);
  }
}

TEST(Bfloat16Test, SpecialValuesAndTies) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX: inf
  EXPECT_EQ(float_to_bfloat16(INFINITY), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // NaN stays NaN
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0xff810000u)), 0xffc1);
  for (uint32_t b = 0; b <= 0xffff; ++b)
    ASSERT_EQ(bits(bfloat16_to_float(static_cast<uint16_t>(b))), b << 16);
}

TEST(Bfloat16Test, RandomFloatsMatchReference) {
  std::mt19937 rng(2);
  for (int i = 0; i < 300000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    ASSERT_EQ(float_to_bfloat16(f), ref::float_to_bf16(f)) << std::hex << bits(f);
  }
}

// The vector kernels convert with F16C / shifts; max(x, x) == x makes them round-trip every
// code, NaNs included, which must give exactly the scalar bits.
TEST(HalfTest, VectorConversionsMatchScalarForEveryCode) {
  std::vector<uint16_t> codes(65536), scalar(65536), vec(65536);
  for (uint32_t h = 0; h <= 0xffff; ++h) codes[h] = static_cast<uint16_t>(h);
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
    ASSERT_TRUE(reduce3_with_isa(ReduceIsa::kScalar, ReduceOp::kMax, t, scalar.data(),
                                 codes.data(), codes.data(), codes.size()).ok());
    for (ReduceIsa isa : {ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
      if (!reduce_isa_supported(isa)) continue;
      ASSERT_TRUE(reduce3_with_isa(isa, ReduceOp::kMax, t, vec.data(), codes.data(),
                                   codes.data(), codes.size()).ok());
      for (size_t h = 0; h < codes.size(); ++h)
        ASSERT_EQ(vec[h], scalar[h]) << dtype_name(t) << " " << reduce_isa_name(isa) << " "
                                     << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace podnet::coll
