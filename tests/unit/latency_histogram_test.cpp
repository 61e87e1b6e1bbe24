#include "core/latency_histogram.h"

#include <gtest/gtest.h>

namespace k25 {
namespace {

TEST(LatencyHistogram, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.quantile(0.99), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(LatencyHistogram, QuantilesAreTightUpperBounds) {
  LatencyHistogram h;
  for (uint64_t us = 1; us <= 100; ++us) h.record(us * 1000);  // 1..100 µs
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.max(), 100'000u);
  EXPECT_DOUBLE_EQ(h.mean(), 50'500.0);
  const uint64_t p99 = h.quantile(0.99), p50 = h.quantile(0.5);
  EXPECT_GE(p99, 99'000u);  // never optimistic
  EXPECT_LE(p99, 99'000u * 1125 / 1000);
  EXPECT_GE(p50, 50'000u);
  EXPECT_LE(p50, 50'000u * 1125 / 1000);
  EXPECT_EQ(h.quantile(1.0), 100'000u);  // clamped to the largest sample
}

TEST(LatencyHistogram, SmallAndHugeValues) {
  LatencyHistogram h;
  for (uint64_t v = 0; v < 8; ++v) h.record(v);  // exact buckets below 8 ns
  EXPECT_EQ(h.quantile(0.5), 3u);
  h.record(uint64_t{1} << 50);  // beyond the last octave: counted, clamped to max
  EXPECT_EQ(h.count(), 9u);
  EXPECT_EQ(h.quantile(1.0), uint64_t{1} << 50);
}

TEST(LatencyHistogram, OneOutlierMovesP99OnlyWhenOverOnePercent) {
  LatencyHistogram h;
  for (int i = 0; i < 1000; ++i) h.record(10'000);
  h.record(5'000'000);
  EXPECT_LE(h.quantile(0.99), 11'250u);
  for (int i = 0; i < 20; ++i) h.record(5'000'000);
  EXPECT_GE(h.quantile(0.99), 5'000'000u);
}

}  // namespace
}  // namespace k25
