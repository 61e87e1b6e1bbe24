// Causal attention of several queries that share one KV head (the heads of a GQA group, and/or
// consecutive tokens of one sequence), reading each key and value row once for all of them.
#pragma once

#include <vector>

namespace k25 {

// `n` consecutive cached positions: position i's key at keys + i * stride, value likewise.
struct KvSpan {
  const float* keys;
  const float* values;
  int n;
};

// One query: a head_dim vector that attends to positions [0, n_pos), written to out.
struct AttentionQuery {
  const float* q;
  int n_pos;
  float* out;
};

// out = sum_p softmax_p(q . k_p * scale) v_p for every query, p < its n_pos. The spans give
// positions 0, 1, ... in order and cover at least the largest n_pos. `scores` is scratch.
void attend_queries(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, float scale, std::vector<float>& scores);

}  // namespace k25
