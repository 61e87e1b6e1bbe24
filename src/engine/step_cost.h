// How much of a step's token budget a token at position p takes (SchedulerOptions::position_cost),
// estimated from the model's shape: a token's weight work is fixed, its attention grows with p.
#pragma once

#include "model/model_config.h"

namespace k25 {

// Cost of one attention multiply-add relative to one weight multiply-add. Measured with
// `perf record` on k25-run batched-bench --npp 2048 (125M Llama shape, Q8_0, AVX-512 on AMD
// EPYC): F32 attention took 1.46x the time of the VNNI matmuls for a quarter of their
// multiply-adds. Weights in F32 make this ratio smaller, so the estimate is then conservative
// (long-context steps are smaller than they need to be).
constexpr double kAttentionMacWeight = 5.8;

// position_cost for `config`: attention multiply-adds per extra position of context, weighted by
// kAttentionMacWeight, over the weight multiply-adds of one token. 0 for a degenerate shape.
double estimated_position_cost(const ModelConfig& config);

}  // namespace k25
