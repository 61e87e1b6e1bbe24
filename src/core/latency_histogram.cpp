#include "core/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace k25 {

// Values below kSubBuckets get one bucket each; above, bucket = (exponent, top 3 bits below the
// leading one), i.e. octave [2^e, 2^(e+1)) split into kSubBuckets equal parts.
int LatencyHistogram::bucket_of(uint64_t v) {
  if (v < kSubBuckets) return static_cast<int>(v);
  const int e = std::bit_width(v) - 1;  // e >= kSubBucketBits
  if (e > kMaxExponent) return kBuckets - 1;
  const int sub = static_cast<int>((v >> (e - kSubBucketBits)) & (kSubBuckets - 1));
  return (e - kSubBucketBits + 1) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::bucket_upper(int bucket) {
  if (bucket < kSubBuckets) return static_cast<uint64_t>(bucket);
  const int e = bucket / kSubBuckets - 1 + kSubBucketBits;
  const uint64_t sub = static_cast<uint64_t>(bucket % kSubBuckets);
  const uint64_t width = uint64_t{1} << (e - kSubBucketBits);
  return (uint64_t{1} << e) + (sub + 1) * width - 1;
}

void LatencyHistogram::record(uint64_t nanoseconds) {
  ++buckets_[bucket_of(nanoseconds)];
  ++count_;
  sum_ += nanoseconds;
  max_ = std::max(max_, nanoseconds);
}

uint64_t LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count_)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    // The last bucket also holds everything beyond its octave: only max_ bounds it.
    if (seen >= rank) return b == kBuckets - 1 ? max_ : std::min(bucket_upper(b), max_);
  }
  return max_;
}

}  // namespace k25
