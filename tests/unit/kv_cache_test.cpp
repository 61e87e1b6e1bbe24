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
  EXPECT_GE(kv.key_run(0, 1, 2).n, 1);
  const float k[4] = {42.0f, 1.0f, 2.0f, 3.0f}, v[4] = {-1.0f, -2.0f, -3.0f, -4.0f};
  kv.store(0, 1, 2, k, v, 4);
  kv.reserve(0, 900);  // growth keeps earlier positions
  float key[4];
  kv.load_key(0, 1, 2, key, 4);
  EXPECT_EQ(std::vector<float>(key, key + 4), std::vector<float>(k, k + 4));
  int run = 0;
  EXPECT_EQ(kv.values(0, 1, 2, &run)[3], -4.0f);
  EXPECT_GE(run, 898);
  EXPECT_GE(kv.key_run(0, 1, 2).n, 898);
}

TEST(KvCache, KeysSitInTilesOfSixteenPositions) {
  ContiguousKvCache kv(1, 3, 100);
  kv.reserve(0, 40);
  for (int p = 0; p < 40; ++p) {
    const float k[3] = {float(p), float(100 + p), float(200 + p)}, v[3] = {};
    kv.store(0, 0, p, k, v, 3);
  }
  const KeyRun run = kv.key_run(0, 0, 21);
  EXPECT_EQ(run.width, kKeyTile);
  EXPECT_EQ(run.lane, 5);
  const float* tile = reinterpret_cast<const float*>(run.tile);
  for (int j = 0; j < 16; ++j) {  // element e of position 16 + j at [e * 16 + j]
    EXPECT_EQ(tile[j], 16.0f + j);
    EXPECT_EQ(tile[16 + j], 116.0f + j);
    EXPECT_EQ(tile[32 + j], 216.0f + j);
  }
  EXPECT_EQ(reinterpret_cast<const float*>(kv.key_run(0, 0, 32).tile), tile + 3 * 16);
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
  EXPECT_THROW(kv.key_run(3, 0, 0), Error);
}

TEST(KvCache, RefusesMoreThanTheContext) {
  ContiguousKvCache kv(1, 2, 64);
  EXPECT_THROW(kv.reserve(0, 65), Error);
  EXPECT_THROW(kv.reserve(-1, 1), Error);
  kv.reserve(0, 8);
  EXPECT_THROW(kv.key_run(0, 0, 64), Error);
}

}  // namespace
}  // namespace k25
