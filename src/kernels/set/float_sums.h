// Internal to src/kernels: horizontal sums of vectors. Every float sum takes the same additions in
// the same order (the two 128-bit halves, then pairs, then neighbours), whether one vector is
// summed alone or eight together, so kernels that batch their sums keep their results. Integer
// sums are exact in any order.
#pragma once

#include <cstdint>

#include "kernels/set/kernel_set_namespace.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {

#if defined(__SSE3__)
inline float hsum(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

inline int32_t hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}
#endif

#if defined(__AVX2__)
inline float hsum(__m256 v) {
  return hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// The sums of v[0..7], element i = hsum(v[i]), for about a third of the instructions.
inline __m256 hsums8(const __m256 v[8]) {
  __m256 t[4], u[2];
  for (int a = 0; a < 4; ++a) {
    t[a] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * a], v[2 * a + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * a], v[2 * a + 1], 0x31));
  }
  for (int b = 0; b < 2; ++b) {
    u[b] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * b], t[2 * b + 1], 0x44),
                         _mm256_shuffle_ps(t[2 * b], t[2 * b + 1], 0xee));
  }
  const __m256 s = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x88),
                                 _mm256_shuffle_ps(u[0], u[1], 0xdd));  // sums 0 2 4 6 | 1 3 5 7
  return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif

}  // namespace k25::K25_KERNEL_SET
