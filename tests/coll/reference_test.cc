// The test reference itself (reference_coll.h): its fills and checks work a period of the
// element index at a time; these tests hold the periods to what the element-wise definitions
// say, and the checks to catching what they must catch.
#include <gtest/gtest-spi.h>

#include <random>
#include <vector>

#include "reference_coll.h"

namespace podnet::testing {
namespace {

// Indices to check a period at: every index of the first blocks, then a sample up to the
// sizes the suites use (1 MiB+5 elements, times 8 ranks for reduce_scatter's inputs).
std::vector<size_t> indices() {
  std::vector<size_t> v;
  for (size_t i = 0; i < 4096; ++i) v.push_back(i);
  std::mt19937_64 rng(7);
  for (int k = 0; k < 4000; ++k) v.push_back(rng() % (9u << 20));
  return v;
}

TEST(Reference, InputsAndReductionsRepeatWithTheirPeriod) {
  for (ReduceOp op : kOps) {
    const size_t p = kInputPeriod;
    for (DataType t : kTypes)
      for (size_t i : indices()) {
        for (int r = 0; r < 8; ++r)
          ASSERT_EQ(input(t, op, r, i), input(t, op, r, i + p))
              << dtype_name(t) << " " << reduce_op_name(op) << " r " << r << " i " << i;
        for (int n : {1, 2, 3, 5, 8})
          ASSERT_EQ(reference(t, op, n, i), reference(t, op, n, i + p)) << dtype_name(t) << " n " << n << " i " << i;
      }
  }
}

TEST(Reference, PatternsRepeatWithTheirPeriod) {
  for (DataType t : {DataType::kInt8, DataType::kUint64, DataType::kFloat16})
    for (uint64_t key : {0ull, 1ull, 96ull, 1000003ull})
      for (size_t i : indices()) ASSERT_EQ(pattern(t, key, i), pattern(t, key, i + kPatternPeriod)) << key << " " << i;
}

TEST(Reference, FillsEqualTheElementwiseDefinitions) {
  const size_t count = 2 * kPatternPeriod + 77, first = 12345;  // past a period of each
  for (DataType t : kTypes) {
    const size_t es = elem_size(t);
    std::vector<unsigned char> got(count * es), want(count * es);
    for (ReduceOp op : kOps) {
      fill_input(t, op, 3, got.data(), count, first);
      for (size_t i = 0; i < count; ++i) put(t, want.data(), i, input(t, op, 3, first + i));
      EXPECT_EQ(got, want) << dtype_name(t) << " " << reduce_op_name(op);
    }
    for (uint64_t key : {0ull, 1ull, 42ull, 96ull, 97ull, 1000003ull}) {  // each from the shared table
      fill_pattern(t, got.data(), count, key);
      for (size_t i = 0; i < count; ++i) put(t, want.data(), i, pattern(t, key, i));
      EXPECT_EQ(got, want) << dtype_name(t) << " key " << key;
    }
  }
}

// fill_pattern and compare_pattern read every key's values out of key 0's, shifted.
TEST(Reference, EveryKeysPatternIsKeyZerosShifted) {
  for (DataType t : {DataType::kInt8, DataType::kUint32, DataType::kBfloat16})
    for (uint64_t key = 0; key < 300; ++key) {
      const size_t shift = detail::pattern_shift(key);
      ASSERT_LT(shift, kPatternPeriod) << key;
      for (size_t i : indices())
        ASSERT_EQ(pattern(t, key, i), pattern(t, 0, i + shift)) << dtype_name(t) << " key " << key << " i " << i;
    }
}

// A correct result passes, one wrong element anywhere is counted and reported.
TEST(Reference, ChecksCountEveryWrongElement) {
  const size_t count = 5000, first = 777;
  const int n = 5;
  for (DataType t : kTypes)
    for (ReduceOp op : kOps) {
      const size_t es = elem_size(t);
      std::vector<unsigned char> buf(count * es);
      for (size_t i = 0; i < count; ++i) put(t, buf.data(), i, reference(t, op, n, first + i));
      EXPECT_EQ(compare(t, op, n, buf.data(), count, first, "ok", 0), 0u) << dtype_name(t) << " " << reduce_op_name(op);
      const size_t bad = 4000;  // in the third period
      put(t, buf.data(), bad, reference(t, op, n, first + bad) + 1);
      size_t wrong = 0;
      EXPECT_NONFATAL_FAILURE(wrong = compare(t, op, n, buf.data(), count, first, "bad", 0), "element 4777");
      EXPECT_EQ(wrong, 1u) << dtype_name(t) << " " << reduce_op_name(op);
    }
  const size_t long_count = 3 * kPatternPeriod + 5;
  for (DataType t : kTypes) {
    const size_t es = elem_size(t);
    std::vector<unsigned char> buf(long_count * es);
    fill_pattern(t, buf.data(), long_count, 9);
    EXPECT_EQ(compare_pattern(t, buf.data(), long_count, 9, "ok", 0), 0u) << dtype_name(t);
    fill_pattern(t, buf.data() + 10 * es, 5, 10);                      // five elements of another block
    put(t, buf.data(), 2 * kPatternPeriod + 3, pattern(t, 9, 3) + 1);  // and one in the third period
    size_t wrong = 0;
    ::testing::TestPartResultArray reports;
    {
      ::testing::ScopedFakeTestPartResultReporter intercept(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &reports);
      wrong = compare_pattern(t, buf.data(), long_count, 9, "bad", 0);
    }
    EXPECT_EQ(wrong, 6u) << dtype_name(t);
    ASSERT_EQ(reports.size(), 3) << dtype_name(t) << ": the first three are reported";
    EXPECT_NE(std::string(reports.GetTestPartResult(0).message()).find("element 10 of block 9"), std::string::npos);
  }
}

// compare_input holds a send buffer to what fill_input wrote: the same rank's inputs pass,
// another rank's or one changed element past the first period do not.
TEST(Reference, InputChecksCatchAChangedSendBuffer) {
  const size_t count = 2 * kInputPeriod + 9;
  for (DataType t : kTypes)
    for (ReduceOp op : kOps) {
      const size_t es = elem_size(t);
      std::vector<unsigned char> buf(count * es);
      fill_input(t, op, 3, buf.data(), count);
      EXPECT_EQ(compare_input(t, op, 3, buf.data(), count, "ok", 0), 0u) << dtype_name(t) << " " << reduce_op_name(op);
      put(t, buf.data(), kInputPeriod + 5, input(t, op, 3, kInputPeriod + 5) + 1);
      size_t wrong = 0;
      EXPECT_NONFATAL_FAILURE(wrong = compare_input(t, op, 3, buf.data(), count, "bad", 0),
                              "input element " + std::to_string(kInputPeriod + 5));
      EXPECT_EQ(wrong, 1u) << dtype_name(t) << " " << reduce_op_name(op);
      size_t others = 0;
      ::testing::TestPartResultArray reports;
      {
        ::testing::ScopedFakeTestPartResultReporter intercept(
            ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &reports);
        others = compare_input(t, op, 4, buf.data(), count, "other rank", 0);
      }
      EXPECT_GT(others, 0u) << dtype_name(t) << " " << reduce_op_name(op);
      EXPECT_GT(reports.size(), 0) << dtype_name(t) << " " << reduce_op_name(op);
    }
}

// What the element-wise comparison accepts without being the encoded reference still passes:
// -0.0 for 0, and an average within the tolerance.
TEST(Reference, ChecksKeepTheElementwiseSemantics) {
  const int n = 2;
  // Sum over 2 ranks of input(): find an index whose reference is 0.
  size_t zero = 0;
  while (reference(DataType::kFloat32, ReduceOp::kSum, n, zero) != 0) ++zero;
  float z = -0.0f;
  EXPECT_EQ(compare(DataType::kFloat32, ReduceOp::kSum, n, &z, 1, zero, "negative zero", 0), 0u);
  const double want = reference(DataType::kFloat64, ReduceOp::kAvg, n, 1);
  double near = want * (1 + 1e-9);
  if (near == want) near = want + 1e-9;
  EXPECT_EQ(compare(DataType::kFloat64, ReduceOp::kAvg, n, &near, 1, 1, "average", 0), 0u);
  double far = want + 0.5;
  EXPECT_NONFATAL_FAILURE(compare(DataType::kFloat64, ReduceOp::kAvg, n, &far, 1, 1, "average", 0), "element 1");
}

}  // namespace
}  // namespace podnet::testing
