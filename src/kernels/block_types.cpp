// Sizes of the activation encodings (the same for every kernel set).
#include "kernels/block_types.h"

#include "core/error.h"
#include "kernels/quant.h"

namespace k25 {
namespace {

int64_t act_block(ActFormat format) {
  return format == ActFormat::kQ8_K ? 256 : 32;
}

size_t act_block_bytes(ActFormat format) {
  switch (format) {
    case ActFormat::kQ8_0:
      return sizeof(BlockQ8_0);
    case ActFormat::kQ8_1:
      return sizeof(BlockQ8_1);
    case ActFormat::kQ8_K:
      return sizeof(BlockQ8_K);
  }
  return 0;
}

}  // namespace

size_t act_row_bytes(ActFormat format, int64_t n) {
  if (n % act_block(format) != 0) {
    fail("activation row of ", n, " elements is not a multiple of the block size ",
         act_block(format));
  }
  return static_cast<size_t>(n / act_block(format)) * act_block_bytes(format);
}

}  // namespace k25
