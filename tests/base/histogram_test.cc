#include "telemetry/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace podnet::telemetry {
namespace {

// The nearest-rank percentile of sorted values, the definition Histogram approximates.
uint64_t exact_percentile(const std::vector<uint64_t>& sorted, double p) {
  if (p <= 0) return sorted.front();
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size()) - 1e-9));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double relative_error(uint64_t got, uint64_t want) {
  if (want == 0) return got == 0 ? 0.0 : 1.0;
  return std::fabs(static_cast<double>(got) - static_cast<double>(want)) / static_cast<double>(want);
}

TEST(HistogramTest, EmptyHistogramIsAllZero) {
  Histogram h;
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  for (double p : {0.0, 50.0, 99.9, 100.0}) EXPECT_EQ(h.percentile(p), 0u);
  Histogram::Summary s = h.summarize();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.p50, 0u);
  EXPECT_EQ(s.p999, 0u);
  EXPECT_EQ(s.max, 0u);
  EXPECT_EQ(s.mean, 0.0);
}

TEST(HistogramTest, ExactCountMinMaxMean) {
  Histogram h;
  for (uint64_t v : {1000u, 17u, 123457u, 999u, 5u}) h.record(v);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.min(), 5u);
  EXPECT_EQ(h.max(), 123457u);
  EXPECT_DOUBLE_EQ(h.mean(), (1000.0 + 17 + 123457 + 999 + 5) / 5);
  h.record_n(7, 3);
  EXPECT_EQ(h.count(), 8u);
  EXPECT_EQ(h.min(), 5u);
  h.record_n(1, 0);  // zero occurrences change nothing
  EXPECT_EQ(h.count(), 8u);
  EXPECT_EQ(h.min(), 5u);
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 0; v < 256; ++v) h.record(v);
  for (uint64_t v = 0; v < 256; ++v) {
    EXPECT_EQ(Histogram::bucket_width(Histogram::bucket_index(v)), 1u) << v;
    EXPECT_EQ(Histogram::bucket_lower_bound(Histogram::bucket_index(v)), v);
  }
  // 256 values 0..255: the p-th percentile by nearest rank is ceil(2.56 p) - 1.
  EXPECT_EQ(h.percentile(50), 127u);
  EXPECT_EQ(h.percentile(100), 255u);
  EXPECT_EQ(h.percentile(0), 0u);
}

TEST(HistogramTest, BucketsTileTheWholeRangeWithBoundedWidth) {
  uint64_t expected_lower = 0;
  for (size_t i = 0; i < Histogram::kBucketCount; ++i) {
    const uint64_t lo = Histogram::bucket_lower_bound(i);
    const uint64_t w = Histogram::bucket_width(i);
    ASSERT_EQ(lo, expected_lower) << "bucket " << i;  // contiguous, no gaps or overlaps
    ASSERT_EQ(Histogram::bucket_index(lo), i);
    ASSERT_EQ(Histogram::bucket_index(lo + (w - 1)), i);
    if (lo < 256) {
      ASSERT_EQ(w, 1u) << i;  // exact
    } else {
      ASSERT_LE(static_cast<double>(w) / static_cast<double>(lo), 1.0 / 128 + 1e-12) << i;
    }
    expected_lower = lo + w;  // wraps to 0 after the last bucket
  }
  EXPECT_EQ(expected_lower, 0u);  // the last bucket ends exactly at UINT64_MAX
  EXPECT_EQ(Histogram::bucket_index(UINT64_MAX), Histogram::kBucketCount - 1);
}

TEST(HistogramTest, UniformPercentilesWithinOnePercent) {
  Histogram h;
  constexpr uint64_t kN = 1'000'000;
  for (uint64_t v = 1; v <= kN; ++v) h.record(v);  // 1 ns .. 1 ms
  EXPECT_EQ(h.count(), kN);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), kN);
  EXPECT_DOUBLE_EQ(h.mean(), (kN + 1) / 2.0);
  for (double p : {0.001, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    // Values are 1..N, so the value at rank r is r.
    const uint64_t want = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p / 100.0 * kN - 1e-6)));
    const uint64_t got = h.percentile(p);
    EXPECT_LE(relative_error(got, want), 0.01) << "p" << p << " got " << got << " want " << want;
    // The scheme promises better than the 1% this test needs.
    EXPECT_LE(relative_error(got, want), 1.0 / 256 + 1e-9) << "p" << p;
  }
  Histogram::Summary s = h.summarize();
  EXPECT_EQ(s.count, kN);
  EXPECT_EQ(s.min, 1u);
  EXPECT_EQ(s.max, kN);
  EXPECT_LE(relative_error(s.p50, 500'000), 0.01);
  EXPECT_LE(relative_error(s.p99, 990'000), 0.01);
  EXPECT_LE(relative_error(s.p999, 999'000), 0.01);
}

TEST(HistogramTest, RandomLogNormalPercentilesWithinBucketError) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(10.0, 2.0);  // ~20 us median, long tail
  Histogram h;
  std::vector<uint64_t> values;
  for (int i = 0; i < 100'000; ++i) {
    const auto v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    const uint64_t want = exact_percentile(values, p);
    EXPECT_LE(relative_error(h.percentile(p), want), 1.0 / 256 + 1e-9) << "p" << p;
  }
  EXPECT_EQ(h.percentile(0), values.front());
  EXPECT_EQ(h.percentile(100), values.back());
}

TEST(HistogramTest, PercentilesStayWithinMinMax) {
  Histogram h;
  h.record(1'000'001);  // alone in a bucket whose middle is above it
  EXPECT_EQ(h.percentile(50), 1'000'001u);
  EXPECT_EQ(h.percentile(0.0001), 1'000'001u);
  h.record(1'000'003);
  for (double p : {1.0, 50.0, 99.0}) {
    EXPECT_GE(h.percentile(p), 1'000'001u);
    EXPECT_LE(h.percentile(p), 1'000'003u);
  }
  // Out-of-range and NaN arguments are clamped, not undefined.
  EXPECT_EQ(h.percentile(-5), h.min());
  EXPECT_EQ(h.percentile(250), h.max());
  EXPECT_EQ(h.percentile(std::nan("")), h.min());
  // Percentiles never decrease with p.
  Histogram g;
  for (uint64_t v = 1; v < 100'000; v += 37) g.record(v * v);
  uint64_t prev = 0;
  for (double p = 0; p <= 100; p += 0.5) {
    const uint64_t cur = g.percentile(p);
    EXPECT_GE(cur, prev) << p;
    prev = cur;
  }
}

TEST(HistogramTest, MergeEqualsRecordingBoth) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> small(0, 5'000);
  std::uniform_int_distribution<uint64_t> large(1'000, 50'000'000);
  Histogram a, b, both;
  for (int i = 0; i < 20'000; ++i) {
    const uint64_t x = small(rng);
    const uint64_t y = large(rng);
    a.record(x);
    b.record(y);
    both.record(x);
    both.record(y);
  }
  Histogram merged = a;
  merged.merge(b);
  EXPECT_EQ(merged.count(), both.count());
  EXPECT_EQ(merged.min(), both.min());
  EXPECT_EQ(merged.max(), both.max());
  EXPECT_DOUBLE_EQ(merged.mean(), both.mean());
  for (double p = 0; p <= 100; p += 0.25) EXPECT_EQ(merged.percentile(p), both.percentile(p)) << p;
  // The order of the merge does not matter, and merging an empty histogram changes nothing.
  Histogram other_way = b;
  other_way.merge(a);
  other_way.merge(Histogram());
  for (double p : {1.0, 50.0, 99.0, 99.9}) EXPECT_EQ(other_way.percentile(p), both.percentile(p));
  Histogram into_empty;
  into_empty.merge(a);
  EXPECT_EQ(into_empty.min(), a.min());
  EXPECT_EQ(into_empty.max(), a.max());
  EXPECT_EQ(into_empty.percentile(50), a.percentile(50));
}

TEST(HistogramTest, HugeValuesUpToTwoToThe63) {
  Histogram h;
  const uint64_t big = uint64_t{1} << 63;
  h.record(big);
  h.record(big);
  h.record(UINT64_MAX);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.min(), big);
  EXPECT_EQ(h.max(), UINT64_MAX);
  // The sum (about 2^64.6) does not fit 64 bits; the mean must still be right.
  const double want_mean = (2.0 * 9223372036854775808.0 + 18446744073709551615.0) / 3;
  EXPECT_LE(std::fabs(h.mean() - want_mean) / want_mean, 1e-12);
  // 2^63 and 2^63 + 2^55 share a bucket of width 2^56; its middle is within 1/256.
  EXPECT_GE(h.percentile(10), big);
  EXPECT_LE(relative_error(h.percentile(10), big), 1.0 / 256);
  EXPECT_EQ(h.percentile(100), UINT64_MAX);
  EXPECT_LE(relative_error(h.percentile(50), big), 1.0 / 256);
  h.record(0);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.percentile(0), 0u);
  Histogram copy;
  copy.merge(h);
  EXPECT_EQ(copy.max(), UINT64_MAX);
  EXPECT_EQ(copy.percentile(99), h.percentile(99));
}

TEST(HistogramTest, ResetForgetsEverything) {
  Histogram h;
  for (uint64_t v = 1; v < 10'000'000; v *= 3) h.record(v);
  h.reset();
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  h.record(42);
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.min(), 42u);
  EXPECT_EQ(h.max(), 42u);
  EXPECT_EQ(h.percentile(1), 42u);
  EXPECT_EQ(h.percentile(99), 42u);  // no stale count left in a higher bucket
  EXPECT_DOUBLE_EQ(h.mean(), 42.0);
}

}  // namespace
}  // namespace podnet::telemetry
