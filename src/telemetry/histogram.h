// A log-bucketed latency histogram in the manner of HdrHistogram.
//
// Units: values are unsigned 64-bit integers; by convention nanoseconds. Nothing in the class
// depends on the unit, so it also serves for bytes or counts.
//
// Buckets: values below 256 each have their own bucket (exact). Above that, every power-of-two
// range [2^k, 2^(k+1)) is split into 128 equal sub-buckets, so a bucket is at most 1/128 of
// its lower bound wide. A percentile reports the middle of its bucket, which is within 1/256
// (0.4%) of every value recorded in that bucket, and is clamped into [min, max]. The full
// uint64 range is covered: 58 * 128 = 7424 buckets, about 58 KiB of counts.
//
// Cost: record() is O(1) and never allocates (the counts are allocated once, in the
// constructor). percentile() and merge() walk the buckets up to the largest value seen.
//
// Thread-safety: none. Keep one histogram per thread and merge() them when reporting.
// Copying copies the counts; a moved-from histogram may only be assigned to or destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace podnet::telemetry {

class Histogram {
 public:
  // What benchmarks print: count, min, p50, p99, p99.9, max and mean. All zero when empty.
  struct Summary {
    uint64_t count = 0;
    uint64_t min = 0;
    uint64_t p50 = 0;
    uint64_t p99 = 0;
    uint64_t p999 = 0;
    uint64_t max = 0;
    double mean = 0.0;
  };

  static constexpr int kSubBucketBits = 7;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;  // 128
  static constexpr size_t kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;  // 7424

  Histogram();

  // Records one value, or `n` occurrences of it.
  void record(uint64_t value) noexcept { record_n(value, 1); }
  void record_n(uint64_t value, uint64_t n) noexcept;

  // Adds every value recorded in `other`; the result equals having recorded both streams.
  void merge(const Histogram& other) noexcept;

  // Forgets every value; keeps the memory.
  void reset() noexcept;

  uint64_t count() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  // Exact smallest / largest value recorded; 0 when empty.
  uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  uint64_t max() const noexcept { return max_; }
  // Exact arithmetic mean (the sum is kept in 128 bits); 0.0 when empty.
  double mean() const noexcept;

  // The value below which `p` percent of the recorded values fall (nearest rank), for p in
  // [0, 100] (clamped outside it): p = 0 gives min(), p = 100 gives max(). Accurate to the
  // bucket's relative error (see above) and never outside [min(), max()]. 0 when empty.
  uint64_t percentile(double p) const noexcept;

  Summary summarize() const noexcept;

  // Bucket geometry, exposed for tests and exporters.
  static size_t bucket_index(uint64_t value) noexcept;
  static uint64_t bucket_lower_bound(size_t index) noexcept;
  static uint64_t bucket_width(size_t index) noexcept;

 private:
  __extension__ using Sum = unsigned __int128;

  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  Sum sum_ = 0;
};

}  // namespace podnet::telemetry
