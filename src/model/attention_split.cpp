#include "model/attention_split.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace k25 {

void merge_attention_parts(const float* parts, const float* stats, int n_parts, int head_dim,
                           float* out) {
  float max = stats[0];
  for (int i = 1; i < n_parts; ++i) max = std::max(max, stats[2 * i]);
  // Part i's share of the whole exp sum: exp(max_i - max) * sum_i, over the total.
  thread_local std::vector<float> weight;
  weight.resize(n_parts);
  float total = 0.0f;
  for (int i = 0; i < n_parts; ++i) {
    weight[i] = std::exp(stats[2 * i] - max) * stats[2 * i + 1];
    total += weight[i];
  }
  std::fill(out, out + head_dim, 0.0f);
  for (int i = 0; i < n_parts; ++i) {
    const float w = weight[i] / total;
    const float* part = parts + static_cast<size_t>(i) * head_dim;
    for (int d = 0; d < head_dim; ++d) out[d] += w * part[d];
  }
}

}  // namespace k25
