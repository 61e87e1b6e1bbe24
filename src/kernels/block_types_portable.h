// Internal to src/kernels and its tests: the block-type kernels with the portable (scalar)
// vec_dot, for checking the SIMD kernels against. On a build without AVX2 these are the
// entries block_type_kernels() returns.
#pragma once

#include "kernels/block_types.h"

namespace k25 {

const BlockTypeKernels* legacy_block_kernels_portable(DType type);
const BlockTypeKernels* iq4_block_kernels_portable(DType type);

}  // namespace k25
