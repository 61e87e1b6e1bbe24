// Long contexts are attended to in fixed chunks of positions so that one token's attention over
// one KV head (a decode step of a model with few KV heads) can still run on every thread: each
// chunk gives a partial output normalised over its own positions (AttentionQuery::stats), and the
// partials are merged in chunk order. The chunks are fixed absolute position ranges, not chosen by
// batch or thread count, so a token's result does not depend on what it is batched with.
#pragma once

namespace k25 {

// Chunk c covers the absolute positions [c * kAttentionChunk, (c + 1) * kAttentionChunk). A
// window inside one chunk (every context up to this length) runs exactly as unsplit attention.
constexpr int kAttentionChunk = 2048;

inline int attention_chunk_of(int position) {
  return position / kAttentionChunk;
}

// out = the softmax attention over the union of n_parts position ranges, from each range's output
// (head_dim floats at parts + i * head_dim, normalised over that range) and its stats (largest
// score, exp sum: stats + 2 * i). Parts are combined in order, so the result depends only on them.
void merge_attention_parts(const float* parts, const float* stats, int n_parts, int head_dim,
                           float* out);

}  // namespace k25
