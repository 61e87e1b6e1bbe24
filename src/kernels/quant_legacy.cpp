// Q4_1, Q5_0 and Q5_1: blocks of 32 (see kernels/block_types.h).
#include "kernels/block_types.h"

namespace k25 {

const BlockTypeKernels* legacy_block_kernels(DType) {
  return nullptr;
}

}  // namespace k25
