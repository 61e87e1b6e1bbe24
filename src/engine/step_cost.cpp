#include "engine/step_cost.h"

namespace k25 {

double estimated_position_cost(const ModelConfig& c) {
  const double q_dim = double{1.0} * c.n_heads * c.head_dim;
  const double kv_dim = double{1.0} * c.kv_dim();
  const double per_layer =
      c.dim * q_dim + 2 * c.dim * kv_dim + q_dim * c.dim + 3.0 * c.dim * c.ffn_dim;
  const double weight_macs = per_layer * c.n_layers;
  // Scores and weighted values: two multiply-adds per head dimension, per head, per layer.
  const double attention_macs = 2.0 * q_dim * c.n_layers;
  return weight_macs > 0 ? kAttentionMacWeight * attention_macs / weight_macs : 0.0;
}

}  // namespace k25
