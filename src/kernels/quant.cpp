// Scalar-reference block formats plus F16C/AVX2 fast paths for the row conversions.
#include "kernels/quant.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/block_types.h"
#include "kernels/quant_simd.h"
#include "util/error.h"

namespace k25 {
namespace {

float f16_to_f32_scalar(uint16_t h) {
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

void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    int8_t qs[kQ8_0Block];
    float d = quantize_block_q8_0(src + b * kQ8_0Block, qs);
    dst[b].d = f32_to_f16(d);
    std::memcpy(dst[b].qs, qs, sizeof(qs));
  }
}

void quantize_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
    const float* x = src + b * kQ4_0Block;
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQ4_0Block; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16(d);
    for (int j = 0; j < kQ4_0Block / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float d = f16_to_f32(src[b].d);
    for (int j = 0; j < kQ8_0Block; ++j) dst[b * kQ8_0Block + j] = src[b].qs[j] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
    const float d = f16_to_f32(src[b].d);
    float* y = dst + b * kQ4_0Block;
    for (int j = 0; j < kQ4_0Block / 2; ++j) {
      y[j] = ((src[b].qs[j] & 0x0f) - 8) * d;
      y[j + 16] = ((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace

void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

float f16_to_f32(uint16_t h) {
  return half_to_float(h);
}

uint16_t f32_to_f16(float f) {
  return float_to_half(f);
}

float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

// Exposed for tests of the portable conversion (the F16C path is used when available).
float f16_to_f32_portable(uint16_t h) {
  return f16_to_f32_scalar(h);
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

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  row_bytes(type, n);  // validates n
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      f16_row_to_f32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::Q8_0:
      dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
      return;
    case DType::Q4_0:
      dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
      return;
    default:
      break;
  }
  const BlockTypeKernels* k = block_type_kernels(type);
  if (k == nullptr) fail("dequantize: no kernels for tensor type ", dtype_name(type));
  k->dequantize(src, dst, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  row_bytes(type, n);  // validates n
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      f32_row_to_f16(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0:
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      return;
    case DType::Q4_0:
      quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      return;
    default:
      break;
  }
  const BlockTypeKernels* k = block_type_kernels(type);
  if (k == nullptr || k->quantize == nullptr) {
    fail("quantize: k25 cannot encode tensor type ", dtype_name(type));
  }
  k->quantize(src, dst, n);
}

}  // namespace k25
