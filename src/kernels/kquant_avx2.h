// Internal to src/kernels: AVX2 pieces the K-quant dot products share.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>

namespace k25 {

inline int32_t kq_hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline int32_t kq_hsum_i32(__m256i v) {
  return kq_hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// For types with 16 sub-blocks of 16: from the 16 scale bytes, the int16 multipliers of the 32
// quants of group g (sub-blocks 2g and 2g + 1: eight lanes each).
inline __m256i kq_pair_scales_i8(__m128i scales, int g) {
  const __m128i pick = _mm_set_epi64x(static_cast<int64_t>(0x0101010101010101ull * (2 * g + 1)),
                                      static_cast<int64_t>(0x0101010101010101ull * (2 * g)));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick));
}

// sum over 16 lanes of scales16[j] * bsums[j] (int16 each), in the 8 int32 lanes.
inline __m256i kq_scaled_bsums(__m256i scales16, const int16_t* bsums) {
  return _mm256_madd_epi16(scales16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)));
}

// For Q4_K / Q5_K: sum over the 8 sub-blocks of 32 of mins16[j] * (bsums[2j] + bsums[2j + 1]).
inline int32_t kq_mins_dot(__m128i mins16, const int16_t* bsums) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
  return kq_hsum_i32(_mm_madd_epi16(mins16, pairs));
}

}  // namespace k25
#endif
