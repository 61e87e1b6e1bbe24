// The verify-cost benchmark's arithmetic and its shape (not its timings: those are measurements).
#include "engine/verify_cost_bench.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "test_paths.h"

namespace k25 {
namespace {

TEST(VerifyCost, ExpectedTokensPerVerifyIsTheGeometricSum) {
  EXPECT_DOUBLE_EQ(expected_tokens_per_verify(0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_verify(0.5, 3), 1 + 0.5 + 0.25 + 0.125);
  EXPECT_DOUBLE_EQ(expected_tokens_per_verify(0.0, 8), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_verify(1.0, 4), 5.0);
}

TEST(VerifyCost, OneRowPerDraftLengthAgainstTheDecodeStep) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  ThreadPool pool(1);
  const std::vector<VerifyCost> costs = measure_verify_cost(*model, 32, 4, 3, pool, KvDtype::kF16);
  ASSERT_EQ(costs.size(), 5u);
  for (int k = 0; k <= 4; ++k) {
    EXPECT_EQ(costs[k].k, k);
    EXPECT_GT(costs[k].seconds, 0);
    EXPECT_DOUBLE_EQ(costs[k].vs_decode, costs[k].seconds / costs[0].seconds);
  }
  EXPECT_THROW(measure_verify_cost(*model, model->config().context_length, 1, 1, pool,
                                   KvDtype::kF16),
               Error);
}

}  // namespace
}  // namespace k25
