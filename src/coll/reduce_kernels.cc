#include "coll/reduce_kernels.h"

#include "base/config.h"
#include "base/log.h"
#include "coll/half.h"
#include "coll/reduce_table.h"

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace podnet::coll {
namespace {

using detail::ReduceTable;

const ReduceTable* compiled_table(ReduceIsa isa) noexcept {
  switch (isa) {
    case ReduceIsa::kScalar: return detail::scalar_reduce_table();
    case ReduceIsa::kAvx2: return detail::avx2_reduce_table();
    case ReduceIsa::kAvx512: return detail::avx512_reduce_table();
  }
  return nullptr;
}

#if defined(__x86_64__)
// Clang's __builtin_cpu_supports has no "f16c", so ask CPUID leaf 1 directly.
bool cpu_has_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool cpu_has(ReduceIsa isa) noexcept {
#if defined(__x86_64__)
  // Also checks that the OS saves the wide registers (XCR0), not just CPUID.
  __builtin_cpu_init();
  switch (isa) {
    case ReduceIsa::kScalar: return true;
    case ReduceIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && cpu_has_f16c() &&
             __builtin_cpu_supports("fma");
    case ReduceIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == ReduceIsa::kScalar;
#endif
}

ReduceIsa best_isa() noexcept {
  for (ReduceIsa isa : {ReduceIsa::kAvx512, ReduceIsa::kAvx2})
    if (reduce_isa_supported(isa)) return isa;
  return ReduceIsa::kScalar;
}

// The one read of PODNET_REDUCE_ISA. A debugging cap rather than tuning, so a bad value
// warns and falls back instead of failing the job.
ReduceIsa choose_isa() {
  const ReduceIsa best = best_isa();
  const std::string& knob = config().reduce_isa;
  const char* env = knob.c_str();
  if (knob.empty() || knob == "auto") return best;
  auto wanted = parse_reduce_isa(env);
  if (!wanted.ok()) {
    PODNET_WARN(kColl, "PODNET_REDUCE_ISA='{}': expected auto, scalar, avx2 or avx512; using {}",
                env, reduce_isa_name(best));
    return best;
  }
  if (!reduce_isa_supported(*wanted)) {
    PODNET_WARN(kColl, "PODNET_REDUCE_ISA='{}': this cpu or build lacks it; using {}", env,
                reduce_isa_name(best));
    return best;
  }
  PODNET_INFO(kColl, "reduction kernels: {} (PODNET_REDUCE_ISA)", reduce_isa_name(*wanted));
  return *wanted;
}

struct Active {
  ReduceIsa isa;
  const ReduceTable* table;
};

const Active& active() {
  static const Active a = [] {
    const ReduceIsa isa = choose_isa();
    return Active{isa, compiled_table(isa)};
  }();
  return a;
}

// Divides in 64 bits: nranks need not fit T (300 ranks averaging uint8 zeros is fine).
template <typename T>
void divide_ints(void* buf, size_t count, int nranks) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  auto* p = static_cast<T*>(buf);
  const auto n = static_cast<Wide>(nranks);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<Wide>(p[i]) / n);
}

template <typename F>
void divide_floats(void* buf, size_t count, int nranks) {
  auto* p = static_cast<F*>(buf);
  const auto n = static_cast<F>(nranks);
  for (size_t i = 0; i < count; ++i) p[i] = p[i] / n;
}

template <float (*kWiden)(uint16_t), uint16_t (*kNarrow)(float)>
void divide_halves(void* buf, size_t count, int nranks) {
  auto* p = static_cast<uint16_t*>(buf);
  const auto n = static_cast<float>(nranks);
  for (size_t i = 0; i < count; ++i) p[i] = kNarrow(kWiden(p[i]) / n);
}

}  // namespace

void reduce(ReduceOp op, DataType t, void* inout, const void* in, size_t count) {
  active().table->at(op, t)(inout, inout, in, count);
}

void reduce3(ReduceOp op, DataType t, void* out, const void* a, const void* b, size_t count) {
  active().table->at(op, t)(out, a, b, count);
}

void finalize_avg(DataType t, void* buf, size_t count, int nranks) {
  assert(nranks >= 1);
  if (nranks <= 1) return;  // the mean of one value is itself
  switch (t) {
    case DataType::kInt8: return divide_ints<int8_t>(buf, count, nranks);
    case DataType::kUint8: return divide_ints<uint8_t>(buf, count, nranks);
    case DataType::kInt32: return divide_ints<int32_t>(buf, count, nranks);
    case DataType::kUint32: return divide_ints<uint32_t>(buf, count, nranks);
    case DataType::kInt64: return divide_ints<int64_t>(buf, count, nranks);
    case DataType::kUint64: return divide_ints<uint64_t>(buf, count, nranks);
    case DataType::kFloat16: return divide_halves<half_to_float, float_to_half>(buf, count, nranks);
    case DataType::kBfloat16:
      return divide_halves<bfloat16_to_float, float_to_bfloat16>(buf, count, nranks);
    case DataType::kFloat32: return divide_floats<float>(buf, count, nranks);
    case DataType::kFloat64: return divide_floats<double>(buf, count, nranks);
  }
}

std::string_view reduce_isa_name(ReduceIsa isa) noexcept {
  switch (isa) {
    case ReduceIsa::kScalar: return "scalar";
    case ReduceIsa::kAvx2: return "avx2";
    case ReduceIsa::kAvx512: return "avx512";
  }
  return "?";
}

Result<ReduceIsa> parse_reduce_isa(std::string_view name) {
  for (ReduceIsa isa : {ReduceIsa::kScalar, ReduceIsa::kAvx2, ReduceIsa::kAvx512})
    if (reduce_isa_name(isa) == name) return isa;
  return Status::InvalidArgument("unknown reduction ISA '{}': expected scalar, avx2 or avx512",
                                 name);
}

bool reduce_isa_supported(ReduceIsa isa) noexcept {
  return compiled_table(isa) != nullptr && cpu_has(isa);
}

std::string_view reduce_isa() { return reduce_isa_name(active().isa); }

Status reduce_with_isa(ReduceIsa isa, ReduceOp op, DataType t, void* inout, const void* in,
                       size_t count) {
  return reduce3_with_isa(isa, op, t, inout, inout, in, count);
}

Status reduce3_with_isa(ReduceIsa isa, ReduceOp op, DataType t, void* out, const void* a,
                        const void* b, size_t count) {
  if (!reduce_isa_supported(isa))
    return Status::Unavailable("reduction ISA {} is not supported by this build or cpu",
                               reduce_isa_name(isa));
  compiled_table(isa)->at(op, t)(out, a, b, count);
  return Status::Ok();
}

}  // namespace podnet::coll
