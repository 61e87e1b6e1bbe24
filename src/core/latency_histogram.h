// A fixed-size log-linear histogram of durations in nanoseconds (8 sub-buckets per power of two,
// so a quantile is within 12.5% of the true value), for latency percentiles such as
// flash_l3_nvme_read_latency_p99 without keeping every sample. Not synchronised.
#pragma once

#include <array>
#include <cstdint>

namespace k25 {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 3;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  // Values up to 2^40 ns (about 18 minutes); larger ones land in the last bucket.
  static constexpr int kMaxExponent = 40;
  static constexpr int kBuckets = (kMaxExponent - kSubBucketBits + 2) * kSubBuckets;

  void record(uint64_t nanoseconds);
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  // The smallest bucket upper bound that covers fraction q (0..1] of the samples, clamped to the
  // largest sample seen; 0 when empty. An upper bound, so a reported p99 is never optimistic.
  uint64_t quantile(double q) const;

 private:
  static int bucket_of(uint64_t v);
  static uint64_t bucket_upper(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace k25
