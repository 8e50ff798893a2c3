// Internal: the table of elementwise kernels that each instruction-set file fills in and
// reduce_kernels.cc dispatches through. Not a public header.
#pragma once

#include "coll/dtype.h"

#include <cstddef>

namespace podnet::coll::detail {

// out[i] = op(a[i], b[i]) for i < count. out may be a or b (the same pointer), but must not
// overlap them otherwise. Never blocks, touches no state besides the three buffers.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t count);

struct ReduceTable {
  ReduceFn fn[kNumReduceOps][kNumDataTypes] = {};  // avg slots hold the sum kernels
  ReduceFn at(ReduceOp op, DataType t) const noexcept {
    return fn[static_cast<size_t>(op)][static_cast<size_t>(t)];
  }
};

// Each returns nullptr when its file was built without the instruction set's compiler flags
// (any non-x86 build); whether the CPU has the instructions is reduce_kernels.cc's question.
const ReduceTable* scalar_reduce_table() noexcept;
const ReduceTable* avx2_reduce_table() noexcept;
const ReduceTable* avx512_reduce_table() noexcept;

}  // namespace podnet::coll::detail
