// EmbeddingPooler: mean, cls and last pooling of hidden rows, and the L2 normalisation.
#include "model/pooling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "parse_error.h"

namespace k25 {
namespace {

TEST(Pooling, NamesAndGgufValues) {
  EXPECT_EQ(parse_pooling("mean"), Pooling::Mean);
  EXPECT_EQ(parse_pooling("cls"), Pooling::Cls);
  EXPECT_EQ(parse_pooling("last"), Pooling::Last);
  EXPECT_EQ(parse_pooling("max"), std::nullopt);
  EXPECT_STREQ(pooling_name(Pooling::Last), "last");
  EXPECT_EQ(pooling_from_gguf(1), Pooling::Mean);
  EXPECT_EQ(pooling_from_gguf(2), Pooling::Cls);
  EXPECT_EQ(pooling_from_gguf(3), Pooling::Last);
  EXPECT_EQ(pooling_from_gguf(0), std::nullopt);  // none
  EXPECT_EQ(pooling_from_gguf(4), std::nullopt);  // rank
}

const float kRows[3][2] = {{3, 0}, {0, 4}, {1, 1}};

std::vector<float> pool(Pooling pooling) {
  EmbeddingPooler p(pooling, 2);
  for (int pos = 0; pos < 3; ++pos) {
    if (p.wants(pos, 3)) p.add(pos, 3, kRows[pos]);
  }
  return p.result();
}

TEST(Pooling, MeanClsAndLastAreNormalised) {
  // Mean of the rows: (4/3, 5/3); normalised: (4, 5) / sqrt(41).
  std::vector<float> mean = pool(Pooling::Mean);
  EXPECT_FLOAT_EQ(mean[0], 4 / std::sqrt(41.0f));
  EXPECT_FLOAT_EQ(mean[1], 5 / std::sqrt(41.0f));
  EXPECT_EQ(pool(Pooling::Cls), (std::vector<float>{1, 0}));
  std::vector<float> last = pool(Pooling::Last);
  EXPECT_FLOAT_EQ(last[0], 1 / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(last[1], 1 / std::sqrt(2.0f));
}

TEST(Pooling, OnlyTheNeededRowsAreWanted) {
  EmbeddingPooler cls(Pooling::Cls, 2), last(Pooling::Last, 2);
  EXPECT_TRUE(cls.wants(0, 3));
  EXPECT_FALSE(cls.wants(1, 3));
  EXPECT_FALSE(last.wants(1, 3));
  EXPECT_TRUE(last.wants(2, 3));
}

TEST(Pooling, RecomputedPositionsCountOnce) {
  // A preempted sequence recomputes positions it has already pooled: they are not wanted again
  // and adding them changes nothing.
  EmbeddingPooler p(Pooling::Mean, 2);
  p.add(0, 3, kRows[0]);
  p.add(1, 3, kRows[1]);
  EXPECT_FALSE(p.wants(0, 3));
  EXPECT_FALSE(p.wants(1, 3));
  p.add(0, 3, kRows[0]);
  p.add(2, 3, kRows[2]);
  EXPECT_EQ(p.result(), pool(Pooling::Mean));
}

TEST(Pooling, MeanRefusesAGap) {
  EmbeddingPooler p(Pooling::Mean, 2);
  EXPECT_NE(testing::error_of([&] { p.add(1, 3, kRows[1]); }).find("before position 0"),
            std::string::npos);
}

TEST(Pooling, AZeroVectorStaysZero) {
  EmbeddingPooler p(Pooling::Mean, 2);
  const float zero[2] = {0, 0};
  p.add(0, 1, zero);
  EXPECT_EQ(p.result(), (std::vector<float>{0, 0}));
}

}  // namespace
}  // namespace k25
