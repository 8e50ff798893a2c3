// AVX2 kernels (with F16C for float16), 256-bit registers. Built with -mavx2 -mf16c -mfma on
// x86-64 only; reduce_kernels.cc calls into this file only after checking the CPU. Must give
// the same bits as reduce_scalar.cc, which is the definition of every operation.
#include "coll/reduce_table.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)

#include "coll/reduce_loop.h"

#include <immintrin.h>

#include <cstdint>

namespace podnet::coll::detail {
namespace {

template <typename T>
struct IntBase {
  using Elem = T;
  using Reg = __m256i;
  static constexpr size_t kLanes = 32 / sizeof(T);
  static Reg load(const Elem* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(Elem* p, Reg v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
};

// There is no 8-bit multiply: multiply the even and the odd bytes as 16-bit lanes and keep
// the low byte of each product (exactly the product modulo 256, signed or not).
inline __m256i mul_8(__m256i a, __m256i b) {
  const __m256i even = _mm256_mullo_epi16(a, b);
  const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
                         _mm256_slli_epi16(odd, 8));
}

// Nor a 64-bit one: lo*lo + ((hi*lo + lo*hi) << 32), modulo 2^64.
inline __m256i mul_64(__m256i a, __m256i b) {
  const __m256i lo = _mm256_mul_epu32(a, b);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                         _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

struct I8 : IntBase<int8_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epi8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epu8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epi32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epu32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epu32(a, b); }
};
// AVX2 compares 64-bit lanes only as signed; unsigned compares flip the sign bits first.
template <typename T, bool kSigned>
struct I64Lanes : IntBase<T> {
  using Reg = __m256i;
  static Reg greater(Reg a, Reg b) {
    if constexpr (kSigned) return _mm256_cmpgt_epi64(a, b);
    const __m256i bias = _mm256_set1_epi64x(INT64_MIN);
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, bias), _mm256_xor_si256(b, bias));
  }
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_blendv_epi8(a, b, greater(a, b)); }
  static Reg max(Reg a, Reg b) { return _mm256_blendv_epi8(b, a, greater(a, b)); }
};

// minps/maxps return b when either operand is NaN; put a back where a is NaN, so a NaN in
// either operand gives a NaN (the scalar definition).
struct F32Ops {
  using Reg = __m256;
  static Reg sum(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  static Reg max(Reg a, Reg b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
struct F32 : F32Ops {
  using Elem = float;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) { return _mm256_loadu_ps(p); }
  static void store(Elem* p, Reg v) { _mm256_storeu_ps(p, v); }
};
struct F64 {
  using Elem = double;
  using Reg = __m256d;
  static constexpr size_t kLanes = 4;
  static Reg load(const Elem* p) { return _mm256_loadu_pd(p); }
  static void store(Elem* p, Reg v) { _mm256_storeu_pd(p, v); }
  static Reg sum(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  static Reg max(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
};

// float16 through F16C: 8 halves widen to 8 floats, and narrow with round-to-nearest-even.
struct F16 : F32Ops {
  using Elem = uint16_t;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(Elem* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bfloat16 by shifts: widen is << 16; narrow adds 0x7fff plus the lowest kept bit (ties to
// even) and takes the top half; NaN keeps its top bits and is made quiet.
struct Bf16 : F32Ops {
  using Elem = uint16_t;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i w = _mm256_cvtepu16_epi32(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static void store(Elem* p, Reg v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  }
};

constexpr ReduceTable make_table() {
  ReduceTable t;
  set_kernels<DataType::kInt8, I8>(t);
  set_kernels<DataType::kUint8, U8>(t);
  set_kernels<DataType::kInt32, I32>(t);
  set_kernels<DataType::kUint32, U32>(t);
  set_kernels<DataType::kInt64, I64Lanes<int64_t, true>>(t);
  set_kernels<DataType::kUint64, I64Lanes<uint64_t, false>>(t);
  set_kernels<DataType::kFloat16, F16>(t);
  set_kernels<DataType::kBfloat16, Bf16>(t);
  set_kernels<DataType::kFloat32, F32>(t);
  set_kernels<DataType::kFloat64, F64>(t);
  return t;
}

constexpr ReduceTable kTable = make_table();

}  // namespace

const ReduceTable* avx2_reduce_table() noexcept { return &kTable; }

}  // namespace podnet::coll::detail

#else  // not built with AVX2: the dispatcher never selects it

const podnet::coll::detail::ReduceTable* podnet::coll::detail::avx2_reduce_table() noexcept {
  return nullptr;
}

#endif
