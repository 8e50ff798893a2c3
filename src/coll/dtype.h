// Element types and reduction operators of podnet's collectives, with the names nccl-tests
// prints ("float", "half", "bfloat16", ...) so benchmark output reads like theirs.
//
// The enums are the public ones of <podnet/coll.h> (podnet::DataType, podnet::ReduceOp),
// brought into podnet::coll so the kernels and the communicator share one type; the name
// functions that header declares are defined in dtype.cc. Everything here is pure and
// thread-safe.
#pragma once

#include <podnet/coll.h>
#include <podnet/status.h>

#include <cstddef>
#include <string_view>

namespace podnet::coll {

// kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16 (IEEE binary16, "half"),
// kBfloat16 (the upper 16 bits of a float32), kFloat32, kFloat64.
using podnet::DataType;
inline constexpr size_t kNumDataTypes = static_cast<size_t>(DataType::kFloat64) + 1;

// kSum, kProd, kMin, kMax, kAvg (sum, then divide by the number of ranks: finalize_avg in
// reduce_kernels.h).
using podnet::ReduceOp;
inline constexpr size_t kNumReduceOps = static_cast<size_t>(ReduceOp::kAvg) + 1;

// Bytes per element (0 for a value outside the enum).
using podnet::dtype_size;
// nccl-tests' name: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
// "bfloat16", "float", "double".
using podnet::dtype_name;
// "sum", "prod", "min", "max", "avg".
using podnet::reduce_op_name;

// Accepts dtype_name()'s names and the aliases float16/fp16, bf16, float32/fp32,
// float64/fp64 (case-sensitive, like nccl-tests' -d flag).
Result<DataType> parse_dtype(std::string_view name);
Result<ReduceOp> parse_reduce_op(std::string_view name);

}  // namespace podnet::coll
