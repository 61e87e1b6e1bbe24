// Internal to src/kernels/set and its tests: each block-type family's entries (null for a type
// of another family), and the legacy and IQ4 ones with the portable (scalar) vec_dot, for
// checking the SIMD kernels against. In the scalar set the two are the same.
#pragma once

#include "kernels/block_types.h"
#include "kernels/set/kernel_set_namespace.h"

namespace k25::K25_KERNEL_SET {

const BlockTypeKernels* legacy_block_kernels(DType type);
const BlockTypeKernels* iq4_block_kernels(DType type);
const BlockTypeKernels* kquant_block_kernels(DType type);

const BlockTypeKernels* legacy_block_kernels_portable(DType type);
const BlockTypeKernels* iq4_block_kernels_portable(DType type);

}  // namespace k25::K25_KERNEL_SET
