// Elementwise reduction kernels for the collectives: out[i] = op(a[i], b[i]) over every
// DataType x ReduceOp, vectorised for AVX-512 and AVX2 with a portable scalar path (ARM and
// older x86). Thread-safety: every function may be called from any thread; none blocks or
// allocates. Buffers are caller-owned, of `count` elements each, any alignment.
//
// Dispatch: the first call picks the best instruction set this build and CPU both have
// (__builtin_cpu_supports on x86-64, scalar elsewhere) and keeps it for the process.
// PODNET_REDUCE_ISA=scalar|avx2|avx512 (read once, for tests and triage) caps the choice; an
// unknown value or one the CPU lacks is logged as a warning and the best available is used.
// Every ISA gives bit-identical results (up to which NaN a NaN result is): reduce_scalar.cc
// is the definition, and tests/coll checks each ISA against an independent reference.
//
// Semantics, per type:
//   - integers: sum and prod wrap modulo 2^bits (two's complement for signed types);
//     min and max are exact.
//   - float32/float64: one IEEE operation per element in the default rounding mode (no fused
//     or reassociated arithmetic), so the result does not depend on the ISA.
//   - float16/bfloat16: widen to float32, compute, round once back to 16 bits (nearest, ties
//     to even; see half.h for inf/NaN/subnormals).
//   - min/max on floats: a NaN in either operand gives a NaN (it propagates, unlike
//     fmin/fmax); which NaN payload comes out is not specified. Otherwise min is
//     `a < b ? a : b` and max `a > b ? a : b`: on a tie (+0 vs -0 included) the result is b.
//   - avg: reduce and reduce3 compute the SUM; the collective calls finalize_avg once at the
//     end (see there for its rounding).
#pragma once

#include "coll/dtype.h"

#include <podnet/status.h>

#include <cstddef>
#include <string_view>

namespace podnet::coll {

// inout[i] = op(inout[i], in[i]). inout and in must not overlap.
void reduce(ReduceOp op, DataType t, void* inout, const void* in, size_t count);

// out[i] = op(a[i], b[i]). out may be exactly a or exactly b; no other overlap.
void reduce3(ReduceOp op, DataType t, void* out, const void* a, const void* b, size_t count);

// Turns a sum over nranks ranks (nranks >= 1) into their average, in place.
//   - integers: the wrapped sum divided by nranks, truncated toward zero (C++ `/`), so
//     avg(-3, -4) == -3 and avg(3, 4) == 3. No overflow beyond what the sum already had:
//     when the true sum fits the type, the result is the exact mean truncated toward zero.
//   - float32/float64: x / nranks as one correctly rounded IEEE division (not a multiply by
//     1/nranks, which can be one ulp off); nranks converts exactly up to 2^24 (float32).
//   - float16/bfloat16: widen, divide in float32, round to nearest even once.
// Scalar on every ISA: it runs once per collective, and integer division has no vector form.
void finalize_avg(DataType t, void* buf, size_t count, int nranks);

enum class ReduceIsa { kScalar, kAvx2, kAvx512 };  // ordered: a higher value needs more

std::string_view reduce_isa_name(ReduceIsa isa) noexcept;  // "scalar", "avx2", "avx512"
Result<ReduceIsa> parse_reduce_isa(std::string_view name);
// True when this build has the kernels and this CPU the instructions (AVX2 also needs F16C
// and FMA; AVX-512 needs F, BW and VL). kScalar is always supported.
bool reduce_isa_supported(ReduceIsa isa) noexcept;
// The instruction set reduce() and reduce3() use in this process, by name.
std::string_view reduce_isa();

// For tests and benchmarks: run one specific ISA's kernel. kUnavailable when
// reduce_isa_supported(isa) is false.
Status reduce_with_isa(ReduceIsa isa, ReduceOp op, DataType t, void* inout, const void* in,
                       size_t count);
Status reduce3_with_isa(ReduceIsa isa, ReduceOp op, DataType t, void* out, const void* a,
                        const void* b, size_t count);

}  // namespace podnet::coll
