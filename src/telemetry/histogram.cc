#include "telemetry/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace podnet::telemetry {

static_assert(Histogram::kBucketCount == 7424);

Histogram::Histogram() : counts_(kBucketCount, 0) {}

// Index layout: group 0 holds the values 0..127 one per bucket. Group g >= 1 holds
// [2^(g+6), 2^(g+7)) in 128 buckets of width 2^(g-1). Group 1 therefore also has width 1,
// so every value below 256 is exact, and the index grows monotonically with the value.
size_t Histogram::bucket_index(uint64_t value) noexcept {
  if (value < kSubBuckets) return static_cast<size_t>(value);
  const int top_bit = std::bit_width(value) - 1;  // >= kSubBucketBits
  const int shift = top_bit - kSubBucketBits;
  const uint64_t group = static_cast<uint64_t>(shift) + 1;
  const uint64_t sub = (value >> shift) - kSubBuckets;  // drops the leading 1 bit
  return static_cast<size_t>((group << kSubBucketBits) + sub);
}

uint64_t Histogram::bucket_lower_bound(size_t index) noexcept {
  const uint64_t group = index >> kSubBucketBits;
  const uint64_t sub = index & (kSubBuckets - 1);
  if (group == 0) return sub;
  return (kSubBuckets + sub) << (group - 1);
}

uint64_t Histogram::bucket_width(size_t index) noexcept {
  const uint64_t group = index >> kSubBucketBits;
  return group == 0 ? 1 : uint64_t{1} << (group - 1);
}

void Histogram::record_n(uint64_t value, uint64_t n) noexcept {
  if (n == 0) return;
  counts_[bucket_index(value)] += n;
  count_ += n;
  sum_ += static_cast<Sum>(value) * n;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void Histogram::merge(const Histogram& other) noexcept {
  if (other.count_ == 0) return;
  // Nothing above the other's largest value can be non-zero, so stop there.
  const size_t last = bucket_index(other.max_);
  for (size_t i = 0; i <= last; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void Histogram::reset() noexcept {
  if (count_ != 0) std::fill_n(counts_.begin(), bucket_index(max_) + 1, uint64_t{0});
  count_ = 0;
  sum_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
}

double Histogram::mean() const noexcept {
  if (count_ == 0) return 0.0;
  // Divide in integers first so a sum beyond 2^64 keeps full precision for the whole part.
  const Sum whole = sum_ / count_;
  const Sum rest = sum_ % count_;
  return static_cast<double>(whole) + static_cast<double>(rest) / static_cast<double>(count_);
}

uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  if (!(p > 0.0)) return min_;  // also catches NaN
  if (p >= 100.0) return max_;
  // Nearest rank: the smallest value with at least ceil(p% of count) values at or below it.
  // The small shave keeps a product like 99.9% * 10^6 = 999000.0000000001 from rounding up
  // to the next rank because 99.9 has no exact binary form.
  const double exact_rank = std::ceil(p * static_cast<double>(count_) / 100.0 * (1.0 - 1e-12));
  uint64_t rank = exact_rank >= static_cast<double>(count_) ? count_
                                                             : static_cast<uint64_t>(exact_rank);
  rank = std::max<uint64_t>(rank, 1);
  const size_t last = bucket_index(max_);
  uint64_t seen = 0;
  size_t i = bucket_index(min_);
  for (; i < last; ++i) {
    seen += counts_[i];
    if (seen >= rank) break;
  }
  // The middle of the bucket halves the worst-case error against reporting either edge.
  const uint64_t mid = bucket_lower_bound(i) + bucket_width(i) / 2;
  return std::clamp(mid, min_, max_);
}

Histogram::Summary Histogram::summarize() const noexcept {
  Summary s;
  s.count = count_;
  s.min = min();
  s.p50 = percentile(50.0);
  s.p99 = percentile(99.0);
  s.p999 = percentile(99.9);
  s.max = max();
  s.mean = mean();
  return s;
}

}  // namespace podnet::telemetry
