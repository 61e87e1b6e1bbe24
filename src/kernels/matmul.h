// Matrix products against weight tensors, the hot path of the forward pass.
#pragma once

#include "model/tensor.h"
#include "util/thread_pool.h"

namespace k25 {

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t < n_tokens, r < rows,
// where W is `w` ([rows][cols] in w.type, cols = w.row_length()). Many tokens per call
// (prefill) is a matrix-matrix product: each weight row is read once for all tokens.
// With AVX-512 VNNI, the first prefill call (16 tokens or more) on a Q8_0/Q4_0 tensor keeps a
// repacked copy of it (the same size as the tensor) for later prefill calls, keyed by its data
// address and a sample of its bytes: weights must not change in place while in use.
void matmul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool& pool);

// Frees the repacked copies, e.g. after unloading a model (they are also evicted, least recently
// used first, beyond 8 GiB in all).
void release_packed_weights();

}  // namespace k25
