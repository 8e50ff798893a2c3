// Portable kernels: the reference semantics every vector ISA must reproduce bit for bit, and
// the path on CPUs without AVX2 (ARM included). Plain C++, built without -m flags; the
// compiler may auto-vectorise it for the baseline ISA.
#include "coll/half.h"
#include "coll/reduce_loop.h"

#include <cstdint>
#include <type_traits>

namespace podnet::coll::detail {
namespace {

// Integers wrap modulo 2^bits. Signed overflow is undefined in C++, so compute in an
// unsigned type at least as wide as int (uint8 * uint8 would otherwise promote to int and
// uint32 * uint32 is fine) and convert back, which C++20 defines as modular.
template <typename T>
struct IntLanes {
  using Elem = T;
  using Reg = T;
  static constexpr size_t kLanes = 1;
  using U = std::make_unsigned_t<T>;
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;
  static Reg load(const Elem* p) { return *p; }
  static void store(Elem* p, Reg v) { *p = v; }
  static W wide(T v) { return static_cast<W>(static_cast<U>(v)); }
  static Reg sum(Reg a, Reg b) { return static_cast<T>(wide(a) + wide(b)); }
  static Reg prod(Reg a, Reg b) { return static_cast<T>(wide(a) * wide(b)); }
  static Reg min(Reg a, Reg b) { return b < a ? b : a; }
  static Reg max(Reg a, Reg b) { return a < b ? b : a; }
};

// Floating point, written to match x86 minps/maxps exactly plus a NaN fix-up: min(a, b) is
// `a < b ? a : b` (so equal values, +0/-0 included, give b), and a NaN in either operand
// gives a NaN (a's when a is NaN).
template <typename F>
struct FloatOps {
  static F sum(F a, F b) { return a + b; }
  static F prod(F a, F b) { return a * b; }
  static F min(F a, F b) { return a != a ? a : (a < b ? a : b); }
  static F max(F a, F b) { return a != a ? a : (a > b ? a : b); }
};

template <typename F>
struct FloatLanes : FloatOps<F> {
  using Elem = F;
  using Reg = F;
  static constexpr size_t kLanes = 1;
  static Reg load(const Elem* p) { return *p; }
  static void store(Elem* p, Reg v) { *p = v; }
};

// float16 and bfloat16 compute in float32 and round once, to nearest even, on the way out.
struct HalfLanes : FloatOps<float> {
  using Elem = uint16_t;
  using Reg = float;
  static constexpr size_t kLanes = 1;
  static Reg load(const Elem* p) { return half_to_float(*p); }
  static void store(Elem* p, Reg v) { *p = float_to_half(v); }
};

struct Bf16Lanes : FloatOps<float> {
  using Elem = uint16_t;
  using Reg = float;
  static constexpr size_t kLanes = 1;
  static Reg load(const Elem* p) { return bfloat16_to_float(*p); }
  static void store(Elem* p, Reg v) { *p = float_to_bfloat16(v); }
};

constexpr ReduceTable make_table() {
  ReduceTable t;
  set_kernels<DataType::kInt8, IntLanes<int8_t>>(t);
  set_kernels<DataType::kUint8, IntLanes<uint8_t>>(t);
  set_kernels<DataType::kInt32, IntLanes<int32_t>>(t);
  set_kernels<DataType::kUint32, IntLanes<uint32_t>>(t);
  set_kernels<DataType::kInt64, IntLanes<int64_t>>(t);
  set_kernels<DataType::kUint64, IntLanes<uint64_t>>(t);
  set_kernels<DataType::kFloat16, HalfLanes>(t);
  set_kernels<DataType::kBfloat16, Bf16Lanes>(t);
  set_kernels<DataType::kFloat32, FloatLanes<float>>(t);
  set_kernels<DataType::kFloat64, FloatLanes<double>>(t);
  return t;
}

constexpr ReduceTable kTable = make_table();

}  // namespace

const ReduceTable* scalar_reduce_table() noexcept { return &kTable; }

}  // namespace podnet::coll::detail
