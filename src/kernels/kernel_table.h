// The kernel table: every kernel whose code depends on the instruction set, as one struct of
// function pointers. Each kernel set (the sources of src/kernels/set/, compiled once per set
// with its own -march flags: scalar, avx2, avxvnni, avx512) fills one, and the functions of
// matmul.h, attention.h, ops.h, quant.h, block_types.h and repack.h call the active set's
// entries through it. Another backend (NEON, CUDA) would implement the same table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/block_types.h"
#include "kernels/repack.h"

namespace k25 {

using MatmulFn = void(const TensorView& w, const float* x, int n_tokens, float* y,
                      ThreadPool& pool);
using MatmulSameInputFn = void(const TensorView* const* ws, float* const* ys, int n, const float* x,
                               int n_tokens, ThreadPool& pool);
using AttendQueriesFn = void(const AttentionQuery* queries, int n_queries, const KvSpan* spans,
                             int n_spans, int kv_stride, int head_dim, float scale,
                             std::vector<float>& scores, KvDtype dtype);
using RmsnormFn = void(float* out, const float* x, const float* weight, int n, float eps);
using RowFn = void(float* x, int n);
using RowReduceFn = float(float* x, int n);
using PairFn = void(float* a, const float* b, int n);
using DotF32Fn = float(const float* a, const float* b, int n);
using AxpyFn = void(float* a, float s, const float* b, int n);
using F16ToF32RowFn = void(const uint16_t* src, float* dst, int64_t n);
using F32ToF16RowFn = void(const float* src, uint16_t* dst, int64_t n);
using DequantizeRowFn = void(DType type, const void* src, float* dst, int64_t n);
using QuantizeRowFn = void(DType type, const float* src, void* dst, int64_t n);
using QuantizeActsFn = void(ActFormat format, const float* x, void* out, int64_t n);
using BlockTypeKernelsFn = const BlockTypeKernels*(DType type);
using RepackSupportedFn = bool(DType type);
using RepackMatricesFn = PackedWeights(const std::vector<TensorView*>& weights, int n_threads,
                                       const RepackedRangeFn& on_repacked);

struct KernelTable {
  const char* isa;  // "scalar", "avx2", "avxvnni" or "avx512"
  MatmulFn* matmul;
  MatmulSameInputFn* matmul_same_input;
  AttendQueriesFn* attend_queries;
  RmsnormFn* rmsnorm;
  RowFn* softmax;
  RowReduceFn* exp_minus_max;
  PairFn* silu_mul;
  PairFn* gelu_f16_mul;
  PairFn* add_inplace;
  DotF32Fn* dot_f32;
  AxpyFn* axpy;
  F16ToF32RowFn* f16_row_to_f32;
  F32ToF16RowFn* f32_row_to_f16;
  DequantizeRowFn* dequantize_row;
  QuantizeRowFn* quantize_row;
  QuantizeActsFn* quantize_acts;
  BlockTypeKernelsFn* block_type_kernels;
  RepackSupportedFn* repack_supported;
  RepackMatricesFn* repack_matrices;
};

// The set in use: the best this CPU runs, or the one the K25_ISA environment variable names.
// Chosen on first use; throws k25::Error (naming the missing CPU feature) when K25_ISA asks for
// a set the CPU cannot run or that does not exist, so programs call it at start.
const KernelTable& kernels();

// The set compiled into this binary under that name, null if none (whether or not this CPU
// runs it: for tests that compare sets).
const KernelTable* find_kernel_table(std::string_view isa);

// The sets this CPU runs, lowest first.
std::vector<std::string> runnable_kernel_isas();

}  // namespace k25
