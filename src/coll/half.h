// float16 (IEEE binary16) and bfloat16 conversions, portable and bit-exact with the x86
// instructions the vector kernels use (F16C's vcvtph2ps/vcvtps2ph), so every ISA gives the
// same bits:
//   - to 16 bits: round to nearest, ties to even; overflow gives +-inf; float16 keeps
//     subnormals (no flush to zero);
//   - NaN stays NaN and comes out quiet: float16 keeps the top 9 payload bits
//     (sign | 0x7e00 | mantissa >> 13), bfloat16 the top 6 (bits >> 16 | 0x0040);
//   - to float32 is exact; a float16 NaN is quieted (F16C does the same), a bfloat16 is
//     widened as is.
// Pure functions, thread-safe. Not for the ISA-flagged translation units (reduce_avx*.cc):
// an inline function compiled there could be the copy the linker keeps for every caller.
#pragma once

#include <bit>
#include <cstdint>

namespace podnet::coll {

inline float half_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)  // inf, or NaN made quiet
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float32
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) noexcept {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past 65504: inf
  if (x >= 0x38800000u) {                       // a normal float16: rebias, round, carry
    const uint32_t r = (x - 0x38000000u + 0xfffu + ((x >> 13) & 1u)) >> 13;
    return static_cast<uint16_t>(sign | r);
  }
  // Below 2^-14: a float16 subnormal, in units of 2^-24 (0x400 carries into the exponent).
  const uint32_t exp = x >> 23;
  if (exp < 102) return sign;  // below 2^-25 (half an ulp): zero
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline float bfloat16_to_float(uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bfloat16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace podnet::coll
