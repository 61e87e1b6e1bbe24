// IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256): 4-bit indices into a non-linear table
// (see kernels/block_types.h).
#include "kernels/block_types.h"

namespace k25 {

const BlockTypeKernels* iq4_block_kernels(DType) {
  return nullptr;
}

}  // namespace k25
