// The K-quants Q2_K..Q6_K: super-blocks of 256 (see kernels/block_types.h).
#include "kernels/block_types.h"

namespace k25 {

const BlockTypeKernels* kquant_block_kernels(DType) {
  return nullptr;
}

}  // namespace k25
