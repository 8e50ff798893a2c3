#include "coll/dtype.h"

#include <array>
#include <utility>

namespace podnet {
namespace {

using coll::kNumDataTypes;
using coll::kNumReduceOps;

// One row per type; parse and print read the same table so they cannot disagree.
struct DtypeInfo {
  DataType type;
  size_t size;
  std::string_view name;
};
constexpr std::array<DtypeInfo, kNumDataTypes> kDtypes{{
    {DataType::kInt8, 1, "int8"},
    {DataType::kUint8, 1, "uint8"},
    {DataType::kInt32, 4, "int32"},
    {DataType::kUint32, 4, "uint32"},
    {DataType::kInt64, 8, "int64"},
    {DataType::kUint64, 8, "uint64"},
    {DataType::kFloat16, 2, "half"},
    {DataType::kBfloat16, 2, "bfloat16"},
    {DataType::kFloat32, 4, "float"},
    {DataType::kFloat64, 8, "double"},
}};

constexpr std::array<std::pair<std::string_view, DataType>, 7> kDtypeAliases{{
    {"float16", DataType::kFloat16},
    {"fp16", DataType::kFloat16},
    {"bf16", DataType::kBfloat16},
    {"float32", DataType::kFloat32},
    {"fp32", DataType::kFloat32},
    {"float64", DataType::kFloat64},
    {"fp64", DataType::kFloat64},
}};

constexpr std::array<std::pair<ReduceOp, std::string_view>, kNumReduceOps> kOps{{
    {ReduceOp::kSum, "sum"},
    {ReduceOp::kProd, "prod"},
    {ReduceOp::kMin, "min"},
    {ReduceOp::kMax, "max"},
    {ReduceOp::kAvg, "avg"},
}};

// The table is in enum order (checked below): a lookup is an index, not a search.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < kDtypes.size(); ++i)
    if (static_cast<size_t>(kDtypes[i].type) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kDtypes must list the types in enum order");

const DtypeInfo* find(DataType t) noexcept {
  const auto i = static_cast<size_t>(t);
  return i < kDtypes.size() ? &kDtypes[i] : nullptr;
}

}  // namespace

// The name functions <podnet/coll.h> declares.
size_t dtype_size(DataType t) noexcept {
  const DtypeInfo* d = find(t);
  return d ? d->size : 0;
}

std::string_view dtype_name(DataType t) noexcept {
  const DtypeInfo* d = find(t);
  return d ? d->name : "?";
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
  for (const auto& [o, name] : kOps)
    if (o == op) return name;
  return "?";
}

}  // namespace podnet

namespace podnet::coll {

Result<DataType> parse_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return d.type;
  for (const auto& [alias, type] : kDtypeAliases)
    if (alias == name) return type;
  return Status::InvalidArgument(
      "unknown data type '{}': expected int8, uint8, int32, uint32, int64, uint64, half "
      "(float16, fp16), bfloat16 (bf16), float (float32, fp32) or double (float64, fp64)",
      name);
}

Result<ReduceOp> parse_reduce_op(std::string_view name) {
  for (const auto& [op, n] : kOps)
    if (n == name) return op;
  return Status::InvalidArgument("unknown reduction '{}': expected sum, prod, min, max or avg",
                                 name);
}

}  // namespace podnet::coll
