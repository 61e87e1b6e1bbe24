#include "engine/step_cost.h"

#include <gtest/gtest.h>

#include "model/mkmodel_shapes.h"

namespace k25 {
namespace {

ModelConfig llama_125m() {
  const ArchParams& p = find_mkmodel_shape("llama-125m").params;
  ModelConfig c;
  c.dim = p.dim;
  c.n_layers = p.n_layers;
  c.n_heads = p.n_heads;
  c.n_kv_heads = p.n_kv_heads;
  c.head_dim = p.head_dim;
  c.rope_dim = p.head_dim;
  c.ffn_dim = p.ffn_dim;
  c.context_length = p.context_length;
  return c;
}

TEST(StepCost, AttentionOverWeightWorkForTheBenchmarkShape) {
  // Weights: 12 x (768*768*2 + 2*768*256 + 3*768*2048) = 75.5M multiply-adds per token;
  // attention: 2 * 768 * 12 = 18432 per position, weighted 5.8.
  EXPECT_NEAR(estimated_position_cost(llama_125m()), 5.8 * 18432 / 75497472.0, 1e-9);
}

TEST(StepCost, WiderFeedForwardMakesPositionsRelativelyCheaper) {
  ModelConfig wide = llama_125m();
  wide.ffn_dim *= 4;
  EXPECT_LT(estimated_position_cost(wide), estimated_position_cost(llama_125m()));
}

TEST(StepCost, EmptyShapeCostsNothing) {
  EXPECT_EQ(estimated_position_cost(ModelConfig{}), 0.0);
}

}  // namespace
}  // namespace k25
