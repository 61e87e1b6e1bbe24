// The block formats' sizes and the scalar f16 / bf16 conversions: code every kernel set shares
// (compiled once, for the baseline ISA). The row conversions and block encoders are per kernel
// set (kernels/set/quant_rows.cpp).
#include "kernels/quant.h"

#include <bit>
#include <cstring>

#include "core/error.h"

namespace k25 {
namespace {

uint16_t f32_to_f16_scalar(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds to >= 65536: infinity
  if (abs < 0x38800000) {
    // Result is subnormal (or zero): value / 2^-24, rounded to nearest even.
    if (abs < 0x33000000) return sign;  // below half of the smallest subnormal
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14 + (113 - exp)
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t r = q + (rem > half || (rem == half && (q & 1)));
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias the exponent and round the mantissa to 10 bits, nearest even; a carry
  // into the exponent is the correct result.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t r = (rebased + 0xfff + ((rebased >> 13) & 1)) >> 13;
  return sign | static_cast<uint16_t>(r);
}

}  // namespace

float f16_to_f32(uint16_t h) {
  return f16_to_f32_portable(h);
}

uint16_t f32_to_f16(float f) {
  return f32_to_f16_scalar(f);
}

float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

uint16_t f32_to_f16_portable(float f) {
  return f32_to_f16_scalar(f);
}

int64_t dtype_block_elements(DType type) {
  const DTypeInfo* info = dtype_info(type);
  if (info == nullptr) fail("unsupported tensor type id ", static_cast<uint32_t>(type));
  return info->block_elements;
}

size_t dtype_block_bytes(DType type) {
  const DTypeInfo* info = dtype_info(type);
  if (info == nullptr) fail("unsupported tensor type id ", static_cast<uint32_t>(type));
  return info->block_bytes;
}

size_t row_bytes(DType type, int64_t n) {
  const int64_t block = dtype_block_elements(type);
  if (n < 0 || n % block != 0) {
    fail("row of ", n, " elements is not a multiple of the block size ", block,
         " of tensor type id ", static_cast<uint32_t>(type));
  }
  return static_cast<size_t>(n / block) * dtype_block_bytes(type);
}

}  // namespace k25
