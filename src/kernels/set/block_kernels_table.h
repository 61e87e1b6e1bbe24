// Internal to src/kernels: the lookup each block-type family (legacy, IQ4, K-quants) does from a
// DType to its kernel entries.
#pragma once

#include <cstddef>

#include "kernels/block_types.h"
#include "kernels/set/kernel_set_namespace.h"

namespace k25::K25_KERNEL_SET {

struct BlockKernelsEntry {
  DType type;
  const BlockTypeKernels* kernels;
};

// The kernels of `type` in table, null if it is not there.
template <size_t N>
const BlockTypeKernels* find_block_kernels(const BlockKernelsEntry (&table)[N], DType type) {
  for (const BlockKernelsEntry& e : table) {
    if (e.type == type) return e.kernels;
  }
  return nullptr;
}

// `portable` with another vec_dot (a SIMD one computing the same bits).
constexpr BlockTypeKernels with_vec_dot(const BlockTypeKernels& portable,
                                        float (*vec_dot)(const void*, const void*, int64_t)) {
  return {portable.act, portable.dequantize, portable.quantize, vec_dot, portable.dot_tile};
}

}  // namespace k25::K25_KERNEL_SET
