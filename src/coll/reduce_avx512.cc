// AVX-512 kernels (F + BW + VL), 512-bit registers. Built with -mavx512f -mavx512bw
// -mavx512vl on x86-64 only; reduce_kernels.cc calls into this file only after checking the
// CPU. Must give the same bits as reduce_scalar.cc, which is the definition of every
// operation. Needs nothing beyond F/BW/VL (no DQ, no FP16), so every AVX-512 CPU qualifies.
#include "coll/reduce_table.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)

#include "coll/reduce_loop.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports once inlined (GCC PR105593, fixed in 13): noise, not a bug in this file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace podnet::coll::detail {
namespace {

template <typename T>
struct IntBase {
  using Elem = T;
  using Reg = __m512i;
  static constexpr size_t kLanes = 64 / sizeof(T);
  static Reg load(const Elem* p) { return _mm512_loadu_si512(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_si512(p, v); }
};

// No 8-bit multiply: multiply even and odd bytes as 16-bit lanes, keep each low byte.
inline __m512i mul_8(__m512i a, __m512i b) {
  const __m512i even = _mm512_mullo_epi16(a, b);
  const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
  return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xff)),
                         _mm512_slli_epi16(odd, 8));
}

// vpmullq is AVX512DQ; build the low 64 bits from 32x32 products instead.
inline __m512i mul_64(__m512i a, __m512i b) {
  const __m512i lo = _mm512_mul_epu32(a, b);
  const __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), b),
                                         _mm512_mul_epu32(a, _mm512_srli_epi64(b, 32)));
  return _mm512_add_epi64(lo, _mm512_slli_epi64(cross, 32));
}

struct I8 : IntBase<int8_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu32(a, b); }
};
struct I64 : IntBase<int64_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi64(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi64(a, b); }
};
struct U64 : IntBase<uint64_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mul_64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu64(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu64(a, b); }
};

// vminps/vmaxps return b when either operand is NaN; put a back where a is NaN, so a NaN in
// either operand gives a NaN (the scalar definition).
struct F32Ops {
  using Reg = __m512;
  static Reg sum(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
  }
  static Reg max(Reg a, Reg b) {
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
  }
};
struct F32 : F32Ops {
  using Elem = float;
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) { return _mm512_loadu_ps(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_ps(p, v); }
};
struct F64 {
  using Elem = double;
  using Reg = __m512d;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) { return _mm512_loadu_pd(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_pd(p, v); }
  static Reg sum(Reg a, Reg b) { return _mm512_add_pd(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm512_mask_mov_pd(_mm512_min_pd(a, b), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a);
  }
  static Reg max(Reg a, Reg b) {
    return _mm512_mask_mov_pd(_mm512_max_pd(a, b), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), a);
  }
};

// float16: 16 halves widen to 16 floats (vcvtph2ps) and narrow with round-to-nearest-even.
struct F16 : F32Ops {
  using Elem = uint16_t;
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(Elem* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bfloat16 by shifts, as in the AVX2 file; vpmovdw narrows the 32-bit lanes.
struct Bf16 : F32Ops {
  using Elem = uint16_t;
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m512i w = _mm512_cvtepu16_epi32(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static void store(Elem* p, Reg v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    const __m512i r = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
};

constexpr ReduceTable make_table() {
  ReduceTable t;
  set_kernels<DataType::kInt8, I8>(t);
  set_kernels<DataType::kUint8, U8>(t);
  set_kernels<DataType::kInt32, I32>(t);
  set_kernels<DataType::kUint32, U32>(t);
  set_kernels<DataType::kInt64, I64>(t);
  set_kernels<DataType::kUint64, U64>(t);
  set_kernels<DataType::kFloat16, F16>(t);
  set_kernels<DataType::kBfloat16, Bf16>(t);
  set_kernels<DataType::kFloat32, F32>(t);
  set_kernels<DataType::kFloat64, F64>(t);
  return t;
}

constexpr ReduceTable kTable = make_table();

}  // namespace

const ReduceTable* avx512_reduce_table() noexcept { return &kTable; }

}  // namespace podnet::coll::detail

#else  // not built with AVX-512: the dispatcher never selects it

const podnet::coll::detail::ReduceTable* podnet::coll::detail::avx512_reduce_table() noexcept {
  return nullptr;
}

#endif
