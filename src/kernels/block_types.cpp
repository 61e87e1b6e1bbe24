#include "kernels/block_types.h"

#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_simd.h"
#include "util/error.h"

namespace k25 {
namespace {

// Round to nearest, ties to even, as llama.cpp's nearest_int does for the K-quant activations.
inline int nearest_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}

void quantize_q8_0_acts(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    y[b].d = float_to_half(quantize_block_q8_0(x + 32 * b, y[b].qs));
  }
}

void quantize_q8_1_acts(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = quantize_block_q8_0(x + 32 * b, y[b].qs);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += y[b].qs[j];
    y[b].d = float_to_half(d);
    y[b].s = float_to_half(d * static_cast<float>(sum));
  }
}

// The scale comes from the element of largest magnitude, signed, so that element maps to
// exactly -127 (llama.cpp's quantize_row_q8_K).
void quantize_q8_k_acts(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[b].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
      y[b].bsums[j] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

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

void quantize_acts(ActFormat format, const float* x, void* out, int64_t n) {
  act_row_bytes(format, n);  // validates n
  switch (format) {
    case ActFormat::kQ8_0:
      quantize_q8_0_acts(x, static_cast<BlockQ8_0*>(out), n);
      return;
    case ActFormat::kQ8_1:
      quantize_q8_1_acts(x, static_cast<BlockQ8_1*>(out), n);
      return;
    case ActFormat::kQ8_K:
      quantize_q8_k_acts(x, static_cast<BlockQ8_K*>(out), n);
      return;
  }
}

const BlockTypeKernels* block_type_kernels(DType type) {
  if (const BlockTypeKernels* k = legacy_block_kernels(type)) return k;
  if (const BlockTypeKernels* k = iq4_block_kernels(type)) return k;
  return kquant_block_kernels(type);
}

}  // namespace k25
