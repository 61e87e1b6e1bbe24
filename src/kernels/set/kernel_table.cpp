// This kernel set's table (K25_KERNEL_SET_NAME is its name, given by the build).
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {

const KernelTable& kernel_table() {
  static constexpr KernelTable table{K25_KERNEL_SET_NAME, &matmul,         &matmul_same_input,
                                     &attend_queries,     &rmsnorm,        &softmax,
                                     &exp_minus_max,      &silu_mul,       &gelu_f16_mul,
                                     &add_inplace,        &dot_f32,        &axpy,
                                     &f16_row_to_f32,     &f32_row_to_f16, &dequantize_row,
                                     &quantize_row,       &quantize_acts,  &block_type_kernels,
                                     &repack_supported,   &repack_matrices};
  return table;
}

}  // namespace k25::K25_KERNEL_SET
