// Every DataType x ReduceOp on every ISA this CPU has, against the reference in reference.h:
// exact bits (a NaN need only match a NaN), tails of every length, misaligned buffers,
// aliasing, and no write past the end.
#include "coll/reduce_kernels.h"

#include "reference.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace podnet::coll {

// Test names and failure messages print "float", "sum" rather than raw bytes.
[[maybe_unused]] static void PrintTo(DataType t, std::ostream* os) { *os << dtype_name(t); }
[[maybe_unused]] static void PrintTo(ReduceOp op, std::ostream* os) { *os << reduce_op_name(op); }

namespace {

using Bytes = std::vector<uint8_t>;
constexpr std::array kAllTypes{DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                               DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                               DataType::kFloat64};
constexpr std::array kAllOps{ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr std::array kAllIsas{ReduceIsa::kScalar, ReduceIsa::kAvx2, ReduceIsa::kAvx512};

template <typename T>
T get(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, &b[i * sizeof(T)], sizeof(T));
  return v;
}
template <typename T>
void put(Bytes& b, size_t i, T v) {
  std::memcpy(&b[i * sizeof(T)], &v, sizeof(T));
}

template <typename T, typename F>
void elementwise(Bytes& out, const Bytes& a, const Bytes& b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) put<T>(out, i, f(get<T>(a, i), get<T>(b, i)));
}

Bytes reference(DataType t, ReduceOp op, const Bytes& a, const Bytes& b, size_t n) {
  Bytes out(a.size());
  auto ints = [&]<typename T>(T) {
    elementwise<T>(out, a, b, n, [&](T x, T y) { return ref::int_op(op, x, y); });
  };
  auto floats = [&]<typename T>(T) {
    elementwise<T>(out, a, b, n, [&](T x, T y) { return ref::float_op(op, x, y); });
  };
  switch (t) {
    case DataType::kInt8: ints(int8_t{}); break;
    case DataType::kUint8: ints(uint8_t{}); break;
    case DataType::kInt32: ints(int32_t{}); break;
    case DataType::kUint32: ints(uint32_t{}); break;
    case DataType::kInt64: ints(int64_t{}); break;
    case DataType::kUint64: ints(uint64_t{}); break;
    case DataType::kFloat32: floats(float{}); break;
    case DataType::kFloat64: floats(double{}); break;
    case DataType::kFloat16:
      elementwise<uint16_t>(out, a, b, n, [&](uint16_t x, uint16_t y) {
        return ref::float_to_half(ref::float_op(op, ref::half_to_float(x), ref::half_to_float(y)));
      });
      break;
    case DataType::kBfloat16:
      elementwise<uint16_t>(out, a, b, n, [&](uint16_t x, uint16_t y) {
        return ref::float_to_bf16(ref::float_op(op, ref::bf16_to_float(x), ref::bf16_to_float(y)));
      });
      break;
  }
  return out;
}

bool is_nan(DataType t, const Bytes& v, size_t i) {
  switch (t) {
    case DataType::kFloat16: return (get<uint16_t>(v, i) & 0x7fff) > 0x7c00;
    case DataType::kBfloat16: return (get<uint16_t>(v, i) & 0x7fff) > 0x7f80;
    case DataType::kFloat32: return std::isnan(get<float>(v, i));
    case DataType::kFloat64: return std::isnan(get<double>(v, i));
    default: return false;
  }
}

// Index of the first element that differs (a NaN matches any NaN), or -1.
long first_mismatch(DataType t, const Bytes& want, const Bytes& got, size_t n) {
  const size_t sz = dtype_size(t);
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&want[i * sz], &got[i * sz], sz) != 0 &&
        !(is_nan(t, want, i) && is_nan(t, got, i)))
      return static_cast<long>(i);
  return -1;
}

// Random bits (so integer sums and products overflow), ordinary floats, special values, and
// ties (b == a or b == -a, which makes +0/-0 pairs) for min/max.
void fill(DataType t, std::mt19937_64& rng, Bytes& a, Bytes& b, size_t n) {
  const size_t sz = dtype_size(t);
  std::uniform_real_distribution<double> ordinary(-100.0, 100.0);
  auto one = [&](Bytes& v, size_t i) {
    uint64_t bits = rng();
    const unsigned kind = rng() % 10;
    if (kind < 6) {  // an ordinary value
      const double x = ordinary(rng);
      switch (t) {
        case DataType::kFloat16: bits = ref::float_to_half(static_cast<float>(x)); break;
        case DataType::kBfloat16: bits = ref::float_to_bf16(static_cast<float>(x)); break;
        case DataType::kFloat32: bits = std::bit_cast<uint32_t>(static_cast<float>(x)); break;
        case DataType::kFloat64: bits = std::bit_cast<uint64_t>(x); break;
        default: break;
      }
    } else if (kind == 6) {  // zero, infinity, NaN, smallest subnormal (in the type's bits)
      const uint64_t top = (t == DataType::kFloat16) ? 0x7c00 : (t == DataType::kBfloat16) ? 0x7f80
                         : (t == DataType::kFloat32) ? 0x7f800000u : 0x7ff0000000000000u;
      const std::array<uint64_t, 4> special{0, top, top | (top >> 1), 1};
      bits = special[rng() % 4] | ((rng() & 1) ? (top << 1) & ~top : 0);  // random sign
    }
    std::memcpy(&v[i * sz], &bits, sz);  // little-endian: the low bytes
  };
  for (size_t i = 0; i < n; ++i) {
    one(a, i);
    one(b, i);
    const unsigned tie = rng() % 16;
    if (tie == 0) std::memcpy(&b[i * sz], &a[i * sz], sz);
    if (tie == 1 && t >= DataType::kFloat16) {  // -a: flip the sign bit
      std::memcpy(&b[i * sz], &a[i * sz], sz);
      b[i * sz + sz - 1] ^= 0x80;
    }
  }
}

class KernelTest : public testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(KernelTest, EveryIsaMatchesReference) {
  const auto [t, op] = GetParam();
  const size_t sz = dtype_size(t);
  std::mt19937_64 rng(static_cast<uint64_t>(t) * 31 + static_cast<uint64_t>(op));
  int tested = 0;
  for (ReduceIsa isa : kAllIsas) {
    if (!reduce_isa_supported(isa)) continue;
    ++tested;
    for (size_t n : {0, 1, 7, 31, 33, 1003, 4099}) {
      SCOPED_TRACE(std::string(reduce_isa_name(isa)) + " count " + std::to_string(n));
      // One spare element in front (misaligned starts) and a canary after the end.
      Bytes a((n + 1) * sz), b((n + 1) * sz);
      fill(t, rng, a, b, n + 1);
      Bytes a_tail(a.begin() + sz, a.end()), b_tail(b.begin() + sz, b.end());
      const Bytes want = reference(t, op, a_tail, b_tail, n);

      Bytes out((n + 2) * sz + 64, 0xa5);
      ASSERT_TRUE(reduce3_with_isa(isa, op, t, &out[sz], &a[sz], &b[sz], n).ok());
      Bytes got(out.begin() + sz, out.begin() + (n + 1) * sz);
      EXPECT_EQ(first_mismatch(t, want, got, n), -1) << "reduce3";
      for (size_t i = 0; i < out.size(); ++i)
        if (i < sz || i >= (n + 1) * sz) {
          ASSERT_EQ(out[i], 0xa5) << "wrote outside at byte " << i;
        }

      Bytes inout = a;  // reduce: inout = op(inout, in)
      ASSERT_TRUE(reduce_with_isa(isa, op, t, &inout[sz], &b[sz], n).ok());
      EXPECT_EQ(first_mismatch(t, want, Bytes(inout.begin() + sz, inout.end()), n), -1) << "reduce";

      Bytes bb = b;  // reduce3 with out == b
      ASSERT_TRUE(reduce3_with_isa(isa, op, t, &bb[sz], &a[sz], &bb[sz], n).ok());
      EXPECT_EQ(first_mismatch(t, want, Bytes(bb.begin() + sz, bb.end()), n), -1) << "out == b";
    }
  }
  EXPECT_GE(tested, 1);
}

TEST_P(KernelTest, DispatchedEntryPointsMatchReference) {
  const auto [t, op] = GetParam();
  const size_t n = 517;
  std::mt19937_64 rng(7);
  Bytes a(n * dtype_size(t)), b(a.size());
  fill(t, rng, a, b, n);
  const Bytes want = reference(t, op, a, b, n);
  Bytes out(a.size());
  reduce3(op, t, out.data(), a.data(), b.data(), n);
  EXPECT_EQ(first_mismatch(t, want, out, n), -1);
  reduce(op, t, a.data(), b.data(), n);
  EXPECT_EQ(first_mismatch(t, want, a, n), -1);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, KernelTest,
                         testing::Combine(testing::ValuesIn(kAllTypes), testing::ValuesIn(kAllOps)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_" +
                                  std::string(reduce_op_name(std::get<1>(p.param)));
                         });

}  // namespace
}  // namespace podnet::coll
