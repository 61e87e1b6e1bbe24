// Internal to src/kernels/set: the entries each kernel set defines in its own namespace and
// lists in its KernelTable (kernel_table.cpp). Calls between the files of one set resolve to
// these, not to the dispatching k25:: functions.
#pragma once

#include "kernels/kernel_table.h"
#include "kernels/set/kernel_set_namespace.h"

// The sets whose matmul reads Q8_0 / Q4_0 weights repacked in groups of 16 rows (repack.h):
// all but the scalar one.
#if defined(__AVX2__)
#define K25_MATMUL_PACKED 1
#endif

namespace k25::K25_KERNEL_SET {

MatmulFn matmul;
MatmulSameInputFn matmul_same_input;
AttendQueriesFn attend_queries;
RmsnormFn rmsnorm;
RowFn softmax;
RowReduceFn exp_minus_max;
PairFn silu_mul;
PairFn gelu_f16_mul;
PairFn add_inplace;
DotF32Fn dot_f32;
AxpyFn axpy;
F16ToF32RowFn f16_row_to_f32;
F32ToF16RowFn f32_row_to_f16;
DequantizeRowFn dequantize_row;
QuantizeRowFn quantize_row;
QuantizeActsFn quantize_acts;
BlockTypeKernelsFn block_type_kernels;
RepackSupportedFn repack_supported;
RepackMatricesFn repack_matrices;

#if defined(K25_MATMUL_PACKED)
// Packs rows [r0, r0 + n_rows) (n_rows <= 16) of a Q8_0 / Q4_0 matrix with n_blocks blocks per
// row and rows w_row_bytes apart into one group of the layout of repack.h at `group` (64-byte
// aligned, packed_group_bytes long).
void pack_group(DType type, const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows,
                int64_t n_blocks, uint8_t* group);
#endif

const KernelTable& kernel_table();

}  // namespace k25::K25_KERNEL_SET
