// The repacked layout's sizes and its owned buffers (the same for every kernel set; the repacking
// itself is per set, kernels/set/repack_groups.cpp).
#include "kernels/repack.h"

#include <sys/mman.h>

#include <cstdlib>

#include "core/error.h"

namespace k25 {

size_t packed_group_bytes(DType type, int64_t cols) {
  if (type == DType::Q4_K) return static_cast<size_t>(cols / 256) * kPackedQ4kSuperBytes;
  if (type == DType::Q5_K) return static_cast<size_t>(cols / 256) * kPackedQ5kSuperBytes;
  if (type == DType::Q6_K) return static_cast<size_t>(cols / 256) * kPackedQ6kSuperBytes;
  const PackedBlockUnits units{packed_quant_bytes(type)};
  return static_cast<size_t>((cols / 32 + kPackedUnitBlocks - 1) / kPackedUnitBlocks) *
         units.unit_bytes();
}

size_t packed_q8_minimum_flags(int64_t rows, int64_t cols) {
  return static_cast<size_t>(packed_group_count(rows)) * packed_group_bytes(DType::Q8_0, cols);
}

size_t packed_matrix_bytes(DType type, int64_t rows, int64_t cols) {
  const auto n_groups = static_cast<size_t>(packed_group_count(rows));
  return n_groups * packed_group_bytes(type, cols) + (type == DType::Q8_0 ? n_groups : 0);
}

void PackedWeights::Free::operator()(void* p) const {
  std::free(p);
}

PackedWeights PackedWeights::allocate(size_t bytes) {
  // Large copies on transparent huge pages: a 4 KB page fault per 4 KB written would cost a
  // good part of the repack time.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= 2 * kHuge ? kHuge : 64;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) fail("repack: cannot allocate ", size, " bytes for packed weights");
  if (align == kHuge) madvise(p, size, MADV_HUGEPAGE);
  PackedWeights m;
  m.data_.reset(p);
  m.bytes_ = bytes;
  return m;
}

}  // namespace k25
