// The row conversions (F16C where the set has it) and the Q8_0 / Q4_0 encoders and decoders
// behind dequantize_row / quantize_row, per kernel set.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/block_types.h"
#include "kernels/quant.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {
namespace {

void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    int8_t qs[kQ8_0Block];
    float d = quantize_block_q8_0(src + b * kQ8_0Block, qs);
    dst[b].d = float_to_half(d);
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
    dst[b].d = float_to_half(d);
    for (int j = 0; j < kQ4_0Block / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float d = half_to_float(src[b].d);
    for (int j = 0; j < kQ8_0Block; ++j) dst[b * kQ8_0Block + j] = src[b].qs[j] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
    const float d = half_to_float(src[b].d);
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
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
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

}  // namespace k25::K25_KERNEL_SET
