// Test-only reference semantics for the reduction kernels, written from the specification
// (reduce_kernels.h, half.h) without calling or copying the library: conversions by nearest
// neighbour search in double, integer wrap-around through 128-bit arithmetic.
#pragma once

#include "coll/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace podnet::coll::ref {

inline double half_value(uint16_t h) {  // exact value of a finite float16
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

inline float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const uint32_t sign = (h & 0x8000u) ? 0x80000000u : 0u;
  if (exp == 0x1f && (h & 0x3ff) == 0) return std::bit_cast<float>(sign | 0x7f800000u);
  if (exp == 0x1f)  // quiet NaN, payload moved to the top of the float mantissa
    return std::bit_cast<float>(sign | 0x7fc00000u | static_cast<uint32_t>(h & 0x3ff) << 13);
  return static_cast<float>(half_value(h));
}

// Nearest float16 to f, ties to the even code: binary search the ordered positive codes.
inline uint16_t float_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    return static_cast<uint16_t>(sign | 0x7e00 | ((bits >> 13) & 0x3ff));
  }
  const double x = std::fabs(static_cast<double>(f));
  if (x >= 65520.0) return sign | 0x7c00;  // 65504 + half its ulp and beyond: infinity
  uint16_t lo = 0, hi = 0x7bff;            // largest code with value <= x
  while (lo < hi) {
    const auto mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (half_value(mid) <= x) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
  }
  uint16_t r = lo;
  if (lo < 0x7bff || x > 65504.0) {
    const double below = x - half_value(lo);
    const double above = (lo == 0x7bff ? 65536.0 : half_value(lo + 1)) - x;
    if (above < below || (above == below && (lo & 1))) r = static_cast<uint16_t>(lo + 1);
  }
  return sign | r;
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

// Nearest bfloat16: the two candidates around |f| are its truncation and the next code up.
inline uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t sign = bits & 0x80000000u, mag = bits & 0x7fffffffu;
  if (mag == 0x7f800000u) return static_cast<uint16_t>((sign | mag) >> 16);
  const uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;
  const double x = std::bit_cast<float>(mag);
  const double vlo = std::bit_cast<float>(lo);
  const double vhi = hi == 0x7f800000u ? std::ldexp(1.0, 128) : std::bit_cast<float>(hi);
  const bool up = (vhi - x) < (x - vlo) || ((vhi - x) == (x - vlo) && ((lo >> 16) & 1));
  return static_cast<uint16_t>((sign | (up ? hi : lo)) >> 16);
}

// Integers: exact in 128 bits modulo 2^128 (a signed value sign-extends), then keep the low
// bits, which is arithmetic modulo 2^bits of T.
template <typename T>
T int_op(ReduceOp op, T a, T b) {
  using U = unsigned __int128;
  switch (op) {
    case ReduceOp::kProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case ReduceOp::kMin: return a <= b ? a : b;
    case ReduceOp::kMax: return a >= b ? a : b;
    default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
}

// NaN in, NaN out; on a tie (+0 and -0 included) the second operand.
template <typename F>
F float_op(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMin:
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return b <= a ? b : a;
    case ReduceOp::kMax:
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return b >= a ? b : a;
    default: return a + b;
  }
}

}  // namespace podnet::coll::ref
