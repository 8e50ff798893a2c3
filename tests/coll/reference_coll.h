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
#include <vector>

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

// Speed: a 1 MiB check computed element by element in double precision (a switch on the type,
// the half-precision conversions, a loop over the ranks) took most of the collective suites'
// time. input(), reference() and pattern() are periodic in the index (kInputPeriod,
// kPatternPeriod), so the fills and checks below compute one period with the functions above,
// encode it with put(), and copy or compare whole periods of bytes. Where the bytes differ
// the element is compared in double as before, so what passes is exactly what passed before
// (reference_test.cc checks the periods). The patterns of all keys are shifts of one, so
// their encoded periods are built once per type (pattern_table) rather than on every call.

// Bytes per element of each type, written here rather than taken from the library.
inline size_t elem_size(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 1;
}

// input(t, op, r, i) and reference(t, op, n, i) repeat every kInputPeriod indices: products
// depend on (i + r) mod 3 and mod 5, the others on (i * 3 + (i >> 7)) mod 11, which 128 more
// indices change by 3 * 128 + 1 = 385 = 35 * 11.
inline constexpr size_t kInputPeriod = 128 * 15;
// pattern(t, key, i) repeats every 128 * 97 indices, by the same argument modulo 97.
inline constexpr size_t kPatternPeriod = 128 * 97;

namespace detail {

// The encoded values value(first) .. value(first + period - 1), or fewer when count is less.
template <typename Value>
std::vector<unsigned char> one_period(DataType t, size_t period, size_t count, size_t first, Value&& value) {
  const size_t n = std::min(period, count);
  std::vector<unsigned char> enc(n * elem_size(t));
  for (size_t j = 0; j < n; ++j) put(t, enc.data(), j, value(first + j));
  return enc;
}

// buf[0 .. bytes) := the encoded period enc[0 .. enc_bytes), repeated.
inline void repeat_encoded(void* buf, size_t bytes, const unsigned char* enc, size_t enc_bytes) {
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t done = 0; done < bytes; done += enc_bytes) std::memcpy(p + done, enc, std::min(enc_bytes, bytes - done));
}

// Element i of buf := put(value(first + i)), for a value of the given period.
template <typename Value>
void fill_periodic(DataType t, void* buf, size_t count, size_t first, size_t period, Value&& value) {
  const std::vector<unsigned char> enc = one_period(t, period, count, first, value);
  repeat_encoded(buf, count * elem_size(t), enc.data(), enc.size());
}

// Counts the elements of got[0 .. count) for which element_ok(elem, first + i, report) is
// false, given the encoded values of one period (enc, n elements of es bytes: element i is
// expected to equal enc[i mod n]) and, for each index of the period, whether its encoded value
// passes element_ok itself. element_ok is asked only where bytes differ from enc or the
// encoded value is not trusted; report is set for the first three wrong elements.
template <typename Ok>
size_t compare_encoded(DataType t, const void* got, size_t count, size_t first, const unsigned char* enc, size_t n,
                       const char* trusted, Ok&& element_ok) {
  const size_t es = elem_size(t);
  const bool all_trusted = std::find(trusted, trusted + n, 0) == trusted + n;
  const auto* p = static_cast<const unsigned char*>(got);
  size_t wrong = 0;
  for (size_t base = 0; base < count; base += n) {
    const size_t len = std::min(n, count - base);
    if (all_trusted && std::memcmp(p + base * es, enc, len * es) == 0) continue;
    for (size_t j = 0; j < len; ++j) {
      const unsigned char* elem = p + (base + j) * es;
      if (trusted[j] && std::memcmp(elem, enc + j * es, es) == 0) continue;
      if (!element_ok(elem, first + base + j, wrong < 3)) ++wrong;
    }
  }
  return wrong;
}

// compare_encoded with the period value(first) .. value(first + period - 1) encoded here.
template <typename Value, typename Ok>
size_t compare_periodic(DataType t, const void* got, size_t count, size_t first, size_t period, Value&& value,
                        Ok&& element_ok) {
  const std::vector<unsigned char> enc = one_period(t, period, count, first, value);
  const size_t es = elem_size(t), n = enc.size() / std::max<size_t>(es, 1);
  std::vector<char> trusted(n);
  for (size_t j = 0; j < n; ++j) trusted[j] = element_ok(enc.data() + j * es, first + j, false);
  return compare_encoded(t, got, count, first, enc.data(), n, trusted.data(), element_ok);
}

// A report of compare_exact: element i (named name(i)) is `have`, expected value(i).
template <typename Value, typename Name>
auto exact_check(DataType t, Value& value, Name& name, const std::string& what, int rank) {
  return [&, t, rank](const unsigned char* elem, size_t i, bool report) {
    double want = value(i), have = get(t, elem, 0);
    if (have != want && report)
      ADD_FAILURE() << what << " rank " << rank << " type " << dtype_name(t) << ": " << name(i) << " is " << have
                    << ", expected " << want;
    return have == want;
  };
}

// compare_periodic with exact equality to value(i); a report names element i as name(i).
template <typename Value, typename Name>
size_t compare_exact(DataType t, const void* got, size_t count, size_t period, Value&& value, Name&& name,
                     const std::string& what, int rank) {
  return compare_periodic(t, got, count, 0, period, value, exact_check(t, value, name, what, rank));
}

}  // namespace detail

// Rank r's inputs for elements first .. first+count-1: element i = input(t, op, r, first + i).
inline void fill_input(DataType t, ReduceOp op, int r, void* buf, size_t count, size_t first = 0) {
  detail::fill_periodic(t, buf, count, first, kInputPeriod, [&](size_t i) { return input(t, op, r, i); });
}

// Compares `count` elements with rank r's inputs (what fill_input wrote): an out-of-place
// call must leave its send buffer so. Returns the number of wrong elements.
inline size_t compare_input(DataType t, ReduceOp op, int r, const void* got, size_t count, const std::string& what,
                            int rank) {
  return detail::compare_exact(
      t, got, count, kInputPeriod, [&](size_t i) { return input(t, op, r, i); },
      [](size_t i) { return "input element " + std::to_string(i); }, what, rank);
}

// Compares `count` elements of a reduction result with reference() from `first_index` on.
// Returns the number of wrong elements (and reports the first few).
inline size_t compare(DataType t, ReduceOp op, int n, const void* got, size_t count, size_t first_index,
                      const std::string& what, int rank) {
  const double tol = op != ReduceOp::kAvg || !is_float(t)                    ? 0
                     : (t == DataType::kFloat16 || t == DataType::kBfloat16) ? 1e-2
                                                                             : 1e-6;
  auto ok = [&](const unsigned char* elem, size_t i, bool report) {
    double want = reference(t, op, n, i);
    // Unsigned types wrap negative references modulo 2^bits; the values used stay >= 0.
    double have = get(t, elem, 0);
    bool good = tol == 0 ? have == want : std::fabs(have - want) <= tol * std::max(1.0, std::fabs(want));
    if (!good && report)
      ADD_FAILURE() << what << " rank " << rank << " type " << dtype_name(t) << " op " << reduce_op_name(op) << " n "
                    << n << ": element " << i << " is " << have << ", expected " << want;
    return good;
  };
  return detail::compare_periodic(
      t, got, count, first_index, kInputPeriod, [&](size_t i) { return reference(t, op, n, i); }, ok);
}

// Data-movement payloads: element i of the block named `key` (keys name a source and a
// destination, see the tests). Exact in every type; 29 is invertible modulo 97, so blocks
// with different keys below 97 differ at every index.
inline double pattern(DataType t, uint64_t key, size_t i) {
  int v = static_cast<int>((key * 29 + i * 3 + (i >> 7)) % 97);
  return is_signed(t) ? v - 48 : v;
}

namespace detail {

// Every key's pattern is key 0's, shifted: 128 more indices add 385 = -3 (mod 97) to
// i * 3 + (i >> 7), and -3 * 55 = 29 (mod 97), so pattern(t, key, i) ==
// pattern(t, 0, i + pattern_shift(key)) (reference_test.cc checks it). The shift is below
// kPatternPeriod.
inline size_t pattern_shift(uint64_t key) { return 128 * ((55 * (key % 97)) % 97); }

// Key 0's pattern for two periods, encoded, and whether each encoded value reads back as
// itself: built once per type and shared by every key, thread and call (2 x 12,416
// elements: at most 194 KiB a type).
struct PatternTable {
  std::vector<unsigned char> enc;
  std::vector<char> trusted;
};
inline const PatternTable& pattern_table(DataType t) {
  static const std::vector<PatternTable> tables = [] {
    std::vector<PatternTable> all(std::size(kTypes));
    for (DataType type : kTypes) {
      PatternTable& tab = all.at(static_cast<size_t>(type));
      const size_t n = 2 * kPatternPeriod, es = elem_size(type);
      tab.enc.resize(n * es);
      tab.trusted.resize(n);
      for (size_t i = 0; i < n; ++i) {
        put(type, tab.enc.data(), i, pattern(type, 0, i));
        tab.trusted[i] = get(type, tab.enc.data(), i) == pattern(type, 0, i);
      }
    }
    return all;
  }();
  return tables.at(static_cast<size_t>(t));
}

}  // namespace detail

inline void fill_pattern(DataType t, void* buf, size_t count, uint64_t key) {
  const size_t es = elem_size(t);
  detail::repeat_encoded(buf, count * es, detail::pattern_table(t).enc.data() + detail::pattern_shift(key) * es,
                         kPatternPeriod * es);
}
// Compares `count` elements with pattern(key); returns the number of wrong ones.
inline size_t compare_pattern(DataType t, const void* got, size_t count, uint64_t key, const std::string& what,
                              int rank) {
  const detail::PatternTable& tab = detail::pattern_table(t);
  const size_t shift = detail::pattern_shift(key);
  auto value = [&](size_t i) { return pattern(t, key, i); };
  auto name = [&](size_t i) { return "element " + std::to_string(i) + " of block " + std::to_string(key); };
  return detail::compare_encoded(t, got, count, 0, tab.enc.data() + shift * elem_size(t), kPatternPeriod,
                                 tab.trusted.data() + shift, detail::exact_check(t, value, name, what, rank));
}

}  // namespace podnet::testing
