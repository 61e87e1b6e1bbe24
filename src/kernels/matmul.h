// Matrix products against weight tensors, the hot path of the forward pass.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace k25 {

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t < n_tokens, r < rows,
// where W is `w` ([rows][cols] in w.type, cols = w.row_length()). Many tokens per call
// (prefill) is a matrix-matrix product: each weight row is read once for all tokens.
void matmul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool& pool);
// ys[i] = the product of ws[i] with x for i < n, exactly as matmul() gives each, with x
// quantised once where the weights take the same activations (repacked K-quants: q/k/v and
// gate/up of a Q4_K_M file in prefill).
void matmul_same_input(const TensorView* const* ws, float* const* ys, int n, const float* x,
                       int n_tokens, ThreadPool& pool);
#endif

}  // namespace k25
