// Test-only reference for the collective tests: how inputs are made and what every rank
// must end with, computed in double precision independently of the library (no library
// conversion, kernel or layout code is called).
//
// Reductions: inputs are small integers (exact in every type), so sums, products, min and
// max are exact and compared bit for bit; only avg divides, and is compared with a relative
// tolerance of 1e-6 (float32/float64) or 1e-2 (float16/bfloat16, 8 and 11 bits of mantissa).
// Data movement (broadcast, gather, alltoall, ...): every element carries a value derived
// from (a key naming its source and destination, its index), exact in every type, so a
// block that lands in the wrong place or at the wrong offset is caught.
#pragma once

#include <gtest/gtest.h>
#include <podnet/coll.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace podnet::testing {

inline constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                                      DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                                      DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                                      DataType::kFloat64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};
inline constexpr size_t kSizes[] = {0, 1, 7, 4096 + 3, (1u << 20) + 5};
inline constexpr size_t kBig = 5000;  // sizes above this run for a subset of types and ops

inline bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}
inline bool is_signed(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 || is_float(t);
}

// The 1 MiB+5 size is run for a subset of types and ops per algorithm to bound the time;
// every type and op runs at the other sizes.
inline bool big_ok(DataType t, ReduceOp op) {
  return (t == DataType::kFloat32 && op == ReduceOp::kSum) || (t == DataType::kInt8 && op == ReduceOp::kMax) ||
         (t == DataType::kBfloat16 && op == ReduceOp::kAvg);
}
// The same for collectives that only move data.
inline bool big_ok(DataType t) { return t == DataType::kFloat32 || t == DataType::kInt8; }

// float16/bfloat16 <-> double for the small integers and simple fractions used here,
// written independently of the library's conversions.
inline uint16_t to_half(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = std::fabs(v);
  int e = static_cast<int>(std::floor(std::log2(a)));
  double m = a / std::ldexp(1.0, e) - 1.0;  // [0,1)
  auto mant = static_cast<uint32_t>(std::nearbyint(m * 1024));
  if (mant == 1024) { mant = 0; ++e; }
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mant);
}
inline double from_half(uint16_t h) {
  int e = (h >> 10) & 0x1F;
  double m = h & 0x3FF;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024, e - 15);
  return (h & 0x8000) ? -v : v;
}
inline uint16_t to_bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline double from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline void put(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::kUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::kUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = to_half(v); break;
    case DataType::kBfloat16: static_cast<uint16_t*>(buf)[i] = to_bf16(v); break;
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}
inline double get(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kUint32: return static_cast<const uint32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case DataType::kFloat16: return from_half(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBfloat16: return from_bf16(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

// Rank r's input element i: small values whose sums and products stay exact in every type.
inline double input(DataType t, ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::kProd) {
    bool two = (i + r) % 3 == 0 && r < 2;
    bool neg = is_signed(t) && (i + r) % 5 == 1 && r < 3;
    return (two ? 2.0 : 1.0) * (neg ? -1.0 : 1.0);
  }
  int v = static_cast<int>((r * 7 + i * 3 + (i >> 7)) % 11);
  return is_signed(t) ? v - 5 : v;
}

// Element i of the reduction over ranks 0..n-1 of input().
inline double reference(DataType t, ReduceOp op, int n, size_t i) {
  double acc = input(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    double x = input(t, op, r, i);
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: acc += x; break;
      case ReduceOp::kProd: acc *= x; break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::kAvg) acc = is_float(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Compares `count` elements of a reduction result with reference() from `first_index` on.
// Returns the number of wrong elements (and reports the first few).
inline size_t compare(DataType t, ReduceOp op, int n, const void* got, size_t count, size_t first_index,
                      const std::string& what, int rank) {
  size_t wrong = 0;
  double tol = op != ReduceOp::kAvg || !is_float(t) ? 0
               : (t == DataType::kFloat16 || t == DataType::kBfloat16) ? 1e-2 : 1e-6;
  for (size_t i = 0; i < count; ++i) {
    double want = reference(t, op, n, first_index + i);
    // Unsigned types wrap negative references modulo 2^bits; the values used stay >= 0.
    double have = get(t, got, i);
    bool ok = tol == 0 ? have == want : std::fabs(have - want) <= tol * std::max(1.0, std::fabs(want));
    if (!ok && wrong++ < 3)
      ADD_FAILURE() << what << " rank " << rank << " type " << dtype_name(t) << " op " << reduce_op_name(op)
                    << " n " << n << ": element " << first_index + i << " is " << have << ", expected " << want;
  }
  return wrong;
}

// Data-movement payloads: element i of the block named `key` (keys name a source and a
// destination, see the tests). Exact in every type; 29 is invertible modulo 97, so blocks
// with different keys below 97 differ at every index.
inline double pattern(DataType t, uint64_t key, size_t i) {
  int v = static_cast<int>((key * 29 + i * 3 + (i >> 7)) % 97);
  return is_signed(t) ? v - 48 : v;
}
inline void fill_pattern(DataType t, void* buf, size_t count, uint64_t key) {
  for (size_t i = 0; i < count; ++i) put(t, buf, i, pattern(t, key, i));
}
// Compares `count` elements with pattern(key); returns the number of wrong ones.
inline size_t compare_pattern(DataType t, const void* got, size_t count, uint64_t key, const std::string& what,
                              int rank) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = pattern(t, key, i), have = get(t, got, i);
    if (have != want && wrong++ < 3)
      ADD_FAILURE() << what << " rank " << rank << " type " << dtype_name(t) << ": element " << i << " of block "
                    << key << " is " << have << ", expected " << want;
  }
  return wrong;
}

}  // namespace podnet::testing
