// Causal attention of several queries that share one KV head (the heads of a GQA group, and/or
// consecutive tokens of one sequence), reading each key and value row once for all of them.
#pragma once

#include <vector>

#include "kernels/kv_dtype.h"

namespace k25 {

// `n` consecutive cached positions. Values: position i's row (of the head) at values + i * stride
// elements. Keys: in tiles of `key_tile` positions (kernels/kv_dtype.h), `keys` pointing at the
// head's part of the tile whose first position is the span's first: element d of position i at
// keys + (i / key_tile) * stride * key_tile + d * key_tile + i % key_tile elements. The elements
// are of the KvDtype given to attend_queries (float for kF32, IEEE half bits for kF16).
struct KvSpan {
  const void* keys;
  const void* values;
  int n;
  int key_tile = 1;
};

// One query: a head_dim vector that attends to positions [first, n_pos), written to out (first > 0
// for a sliding-window layer: the positions before its window are not attended to). When `stats`
// is set, stats[0] gets the largest scaled score of the window and stats[1] the sum of
// exp(score - stats[0]) over it: what merging this output with the same query's outputs over
// other position ranges needs (each output is normalised over its own range).
struct AttentionQuery {
  const float* q;
  int n_pos;
  float* out;
  int first = 0;
  float* stats = nullptr;
};

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// out = sum_p softmax_p(q . k_p * scale) v_p for every query, first <= p < n_pos. The spans give
// positions 0, 1, ... in order and cover at least the largest n_pos. `scores` is scratch. A score
// is q[0] k[0], then multiply-adds of q[d] k[d] in order of d (fused on the sets that have FMA),
// then times the scale: the same bits whatever the other queries, the spans or the key tiles.
// F16 rows are widened to float as they are read and everything accumulates in float. With F16
// rows the query and the softmax probabilities are rounded to F16 as well, which is what
// llama.cpp's attention over an F16 cache computes (its F16 matrix products take F16 operands).
void attend_queries(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, float scale, std::vector<float>& scores,
                    KvDtype dtype = KvDtype::kF32);
#endif

}  // namespace k25
