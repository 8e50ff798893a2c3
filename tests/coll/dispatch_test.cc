// Names and parsing of types, ops and ISAs, and how the kernel ISA is chosen.
#include "coll/dtype.h"
#include "coll/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace podnet::coll {
namespace {

TEST(DtypeTest, NamesSizesAndParse) {
  struct Row { DataType t; size_t size; const char* name; };
  const Row rows[] = {{DataType::kInt8, 1, "int8"},        {DataType::kUint8, 1, "uint8"},
                      {DataType::kInt32, 4, "int32"},      {DataType::kUint32, 4, "uint32"},
                      {DataType::kInt64, 8, "int64"},      {DataType::kUint64, 8, "uint64"},
                      {DataType::kFloat16, 2, "half"},     {DataType::kBfloat16, 2, "bfloat16"},
                      {DataType::kFloat32, 4, "float"},    {DataType::kFloat64, 8, "double"}};
  for (const Row& r : rows) {
    EXPECT_EQ(dtype_size(r.t), r.size);
    EXPECT_EQ(dtype_name(r.t), r.name);
    auto parsed = parse_dtype(r.name);
    ASSERT_TRUE(parsed.ok()) << r.name;
    EXPECT_EQ(*parsed, r.t);
  }
}

TEST(DtypeTest, Aliases) {
  EXPECT_EQ(*parse_dtype("float16"), DataType::kFloat16);
  EXPECT_EQ(*parse_dtype("fp16"), DataType::kFloat16);
  EXPECT_EQ(*parse_dtype("bf16"), DataType::kBfloat16);
  EXPECT_EQ(*parse_dtype("float32"), DataType::kFloat32);
  EXPECT_EQ(*parse_dtype("fp32"), DataType::kFloat32);
  EXPECT_EQ(*parse_dtype("float64"), DataType::kFloat64);
  EXPECT_EQ(*parse_dtype("fp64"), DataType::kFloat64);
}

TEST(DtypeTest, UnknownNameIsAnErrorThatQuotesIt) {
  auto r = parse_dtype("int16");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'int16'"), std::string::npos);
  EXPECT_FALSE(parse_dtype("").ok());
}

TEST(ReduceOpTest, NamesAndParse) {
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    auto parsed = parse_reduce_op(reduce_op_name(op));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(reduce_op_name(ReduceOp::kProd), "prod");
  auto bad = parse_reduce_op("mean");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mean'"), std::string::npos);
}

TEST(ReduceIsaTest, NamesParseAndSupport) {
  for (ReduceIsa isa : {ReduceIsa::kScalar, ReduceIsa::kAvx2, ReduceIsa::kAvx512})
    EXPECT_EQ(*parse_reduce_isa(reduce_isa_name(isa)), isa);
  EXPECT_FALSE(parse_reduce_isa("sse2").ok());
  EXPECT_TRUE(reduce_isa_supported(ReduceIsa::kScalar));
  // AVX-512 here implies AVX2 (every AVX-512 CPU has AVX2, F16C and FMA).
  if (reduce_isa_supported(ReduceIsa::kAvx512)) {
    EXPECT_TRUE(reduce_isa_supported(ReduceIsa::kAvx2));
  }
  auto active = parse_reduce_isa(reduce_isa());
  ASSERT_TRUE(active.ok()) << reduce_isa();
  EXPECT_TRUE(reduce_isa_supported(*active));
  RecordProperty("reduce_isa", std::string(reduce_isa()));
}

TEST(ReduceIsaTest, UnsupportedIsaIsUnavailable) {
  for (ReduceIsa isa : {ReduceIsa::kAvx512, ReduceIsa::kAvx2}) {
    if (reduce_isa_supported(isa)) continue;
    int8_t x = 1;
    Status st = reduce_with_isa(isa, ReduceOp::kSum, DataType::kInt8, &x, &x, 1);
    EXPECT_EQ(st.code(), Code::kUnavailable);
    return;
  }
  GTEST_SKIP() << "this cpu supports every reduction ISA; nothing is unavailable";
}

// PODNET_REDUCE_ISA is read once per process, so each case runs in a fresh child
// ("threadsafe" death tests re-execute the binary for just this test).
TEST(ReduceIsaDeathTest, EnvironmentCapsTheChoice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("PODNET_LOG", "warn", 1);
  ::setenv("PODNET_REDUCE_ISA", "scalar", 1);
  EXPECT_EXIT(std::exit(reduce_isa() == "scalar" ? 0 : 1), testing::ExitedWithCode(0), "");
  ::setenv("PODNET_REDUCE_ISA", "bogus", 1);
  EXPECT_EXIT(std::exit(reduce_isa_supported(*parse_reduce_isa(reduce_isa())) ? 0 : 1),
              testing::ExitedWithCode(0), "PODNET_REDUCE_ISA='bogus'");
  if (reduce_isa_supported(ReduceIsa::kAvx2)) {
    ::setenv("PODNET_REDUCE_ISA", "avx2", 1);
    EXPECT_EXIT(std::exit(reduce_isa() == "avx2" ? 0 : 1), testing::ExitedWithCode(0), "");
  }
  ::unsetenv("PODNET_REDUCE_ISA");
}

}  // namespace
}  // namespace podnet::coll
