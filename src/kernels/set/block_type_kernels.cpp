// The activation quantisers and the lookup of a block type's kernels, per kernel set.
#include "kernels/block_types.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/quant.h"
#include "kernels/set/block_types_portable.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

// Round to nearest, ties to even, as llama.cpp's nearest_int does for the K-quant activations.
inline int nearest_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// llama.cpp's x86 activation quantiser (its AVX2 quantize_row_q8_0 / q8_1): q = x * (127 / amax)
// rounded half to even, d = amax / 127. (The GGUF reference encoder of Q8_0 weights divides by d
// and rounds half away from zero instead.) Returns d.
float quantize_act_block(const float* x, int8_t* q) {
#if defined(__AVX2__)
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax8 = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax8 = _mm256_max_ps(amax8, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float amax = _mm_cvtss_f32(m);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) {
    qi[i] = _mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // The packs work per 128-bit lane; the permutation restores element order.
  const __m256i p8 =
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(nearest_int(x[j] * id));
#endif
  return amax / 127.0f;
}

void quantize_q8_0_acts(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    y[b].d = float_to_half(quantize_act_block(x + 32 * b, y[b].qs));
  }
}

void quantize_q8_1_acts(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = quantize_act_block(x + 32 * b, y[b].qs);
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

}  // namespace

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

}  // namespace k25::K25_KERNEL_SET
