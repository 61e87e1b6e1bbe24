#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace k25 {
namespace {

TEST(KvCache, ReservesOnDemandAndKeepsRows) {
  ContiguousKvCache kv(/*n_layers=*/2, /*kv_dim=*/4, /*max_positions=*/1000);
  EXPECT_EQ(kv.bytes_used(), 0u);
  kv.reserve(0, 3);
  const size_t after_first = kv.bytes_used();
  EXPECT_GT(after_first, 0u);
  EXPECT_LT(after_first, 2u * 2 * 1000 * 4 * sizeof(float));  // not the whole context
  int run = 0;
  float* k = kv.keys(0, 1, 2, &run);
  EXPECT_GE(run, 1);
  k[0] = 42.0f;
  kv.reserve(0, 900);  // growth keeps earlier rows
  EXPECT_EQ(kv.keys(0, 1, 2, &run)[0], 42.0f);
  EXPECT_GE(run, 898);
}

TEST(KvCache, SequencesAreIndependentAndClearFreesMemory) {
  ContiguousKvCache kv(1, 2, 64);
  kv.reserve(0, 10);
  kv.reserve(3, 10);
  int run = 0;
  kv.values(0, 0, 5, &run)[1] = 1.0f;
  kv.values(3, 0, 5, &run)[1] = 2.0f;
  EXPECT_EQ(kv.values(0, 0, 5, &run)[1], 1.0f);
  const size_t both = kv.bytes_used();
  kv.clear(3);
  EXPECT_LT(kv.bytes_used(), both);
  EXPECT_THROW(kv.keys(3, 0, 0, &run), Error);
}

TEST(KvCache, RefusesMoreThanTheContext) {
  ContiguousKvCache kv(1, 2, 64);
  EXPECT_THROW(kv.reserve(0, 65), Error);
  EXPECT_THROW(kv.reserve(-1, 1), Error);
  int run = 0;
  kv.reserve(0, 8);
  EXPECT_THROW(kv.keys(0, 0, 64, &run), Error);
}

}  // namespace
}  // namespace k25
