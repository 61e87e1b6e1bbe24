// Block formats of quantised tensors and conversions between them and float.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace k25 {

constexpr int kQ8_0Block = 32;  // elements per block
constexpr int kQ4_0Block = 32;

// GGUF layouts: Q8_0 = f16 scale + 32 x int8; Q4_0 = f16 scale + 16 bytes of nibbles
// (element j in the low nibble of byte j, element j+16 in the high nibble), value = (q - 8) * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQ8_0Block];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQ4_0Block / 2];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
// The same conversions in portable code (the kernel sets use F16C where they have it). The
// widening is inline: the sets without F16C convert a scale per weight block with it.
inline float f16_to_f32_portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13) | (mant != 0 ? 0x400000u : 0u);  // quiet NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise the mantissa.
    int e = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}
uint16_t f32_to_f16_portable(float f);
// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// Rows of n values (F16C on the kernel sets that have it), rounding to nearest even.
void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n);
void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n);
#endif

int64_t dtype_block_elements(DType type);  // 1 for F32/F16/BF16, 32 or 256 for block types
size_t dtype_block_bytes(DType type);
// Bytes of one row of n elements; throws k25::Error if n is not a multiple of the block size.
size_t row_bytes(DType type, int64_t n);

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
void dequantize_row(DType type, const void* src, float* dst, int64_t n);
// Encodes n floats (n a multiple of the block size for block types) into `type`.
void quantize_row(DType type, const float* src, void* dst, int64_t n);
#endif

}  // namespace k25
