// Internal to src/kernels: the Q8_0 block quantiser shared by quantize_row and the activation
// quantisation of matmul, plus the portable f16 conversions (tested against F16C).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/quant.h"
#include "kernels/set/kernel_set_namespace.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {

// Inline forms of f16_to_f32 / f32_to_f16 for the inner loops of the kernels.
inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32_portable(h);
#endif
}

inline uint16_t float_to_half(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  return f32_to_f16_portable(f);
#endif
}

// Quantises 32 floats: d = amax / 127, q = roundf(x * (1 / d)) (nearest, ties away from zero,
// as the GGUF reference quantiser does). Returns d as float; the caller stores it (as f16).
inline float quantize_block_q8_0(const float* x, int8_t* q) {
#if defined(__AVX2__)
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float d = _mm_cvtss_f32(m) / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) {
    // roundf: truncate, then step away from zero when the dropped fraction is >= 0.5 (exact,
    // unlike adding 0.5 before truncating).
    const __m256 s = _mm256_mul_ps(v[i], id);
    const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(s, t));
    const __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ),
                                      _mm256_or_ps(one, _mm256_and_ps(s, sign_mask)));
    qi[i] = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
  }
  // Pack 32 x int32 to int8; the packs work per 128-bit lane, so restore order afterwards.
  const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]);
  const __m256i p16b = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(p8, order));
  return d;
#else
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  return d;
#endif
}

}  // namespace k25::K25_KERNEL_SET
