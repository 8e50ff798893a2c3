// Internal: the one elementwise loop every ISA shares, specialised by a "lanes" traits type
// that says how to load, store and combine one register's worth of elements:
//
//   struct Lanes {
//     using Elem = ...;                      // element as stored (uint16_t for half/bf16)
//     using Reg = ...;                       // register it is computed in (float for halves)
//     static constexpr size_t kLanes = ...;  // elements per register
//     static Reg load(const Elem*);  static void store(Elem*, Reg);
//     static Reg sum(Reg, Reg); prod; min; max;
//   };
//
// Everything here sits in an anonymous namespace on purpose: each ISA file is compiled with
// its own -m flags, and internal linkage keeps the linker from merging an AVX-512
// instantiation into code that runs on a CPU without it.
#pragma once

#include "coll/reduce_table.h"

#include <cstddef>
#include <cstring>

namespace podnet::coll::detail {
namespace {

template <class L, ReduceOp kOp>
inline typename L::Reg apply(typename L::Reg a, typename L::Reg b) {
  if constexpr (kOp == ReduceOp::kProd) return L::prod(a, b);
  else if constexpr (kOp == ReduceOp::kMin) return L::min(a, b);
  else if constexpr (kOp == ReduceOp::kMax) return L::max(a, b);
  else return L::sum(a, b);  // kSum and kAvg: averaging is finalize_avg's job
}

template <class L, ReduceOp kOp>
void lanes_kernel(void* out, const void* a, const void* b, size_t count) {
  using Elem = typename L::Elem;
  constexpr size_t kW = L::kLanes;
  auto* o = static_cast<Elem*>(out);
  const auto* pa = static_cast<const Elem*>(a);
  const auto* pb = static_cast<const Elem*>(b);
  size_t i = 0;
  // Two registers per step: both loads of a step happen before its stores, so out == a or
  // out == b stays correct.
  for (; i + 2 * kW <= count; i += 2 * kW) {
    auto r0 = apply<L, kOp>(L::load(pa + i), L::load(pb + i));
    auto r1 = apply<L, kOp>(L::load(pa + i + kW), L::load(pb + i + kW));
    L::store(o + i, r0);
    L::store(o + i + kW, r1);
  }
  for (; i + kW <= count; i += kW) L::store(o + i, apply<L, kOp>(L::load(pa + i), L::load(pb + i)));
  if constexpr (kW > 1) {
    // The tail runs through the same vector code on zero-padded copies, so it rounds and
    // treats NaN exactly like the body (and the ISA files need no scalar fallback code).
    if (i < count) {
      const size_t rest = (count - i) * sizeof(Elem);
      alignas(64) Elem ta[kW] = {}, tb[kW] = {}, to[kW];
      std::memcpy(ta, pa + i, rest);
      std::memcpy(tb, pb + i, rest);
      L::store(to, apply<L, kOp>(L::load(ta), L::load(tb)));
      std::memcpy(o + i, to, rest);
    }
  }
}

// Fills the five op slots of one data type.
template <DataType kType, class L>
constexpr void set_kernels(ReduceTable& t) {
  auto& col = t.fn;
  const auto d = static_cast<size_t>(kType);
  col[static_cast<size_t>(ReduceOp::kSum)][d] = &lanes_kernel<L, ReduceOp::kSum>;
  col[static_cast<size_t>(ReduceOp::kProd)][d] = &lanes_kernel<L, ReduceOp::kProd>;
  col[static_cast<size_t>(ReduceOp::kMin)][d] = &lanes_kernel<L, ReduceOp::kMin>;
  col[static_cast<size_t>(ReduceOp::kMax)][d] = &lanes_kernel<L, ReduceOp::kMax>;
  col[static_cast<size_t>(ReduceOp::kAvg)][d] = &lanes_kernel<L, ReduceOp::kSum>;
}

}  // namespace
}  // namespace podnet::coll::detail
