// Internal to src/kernels: AVX2 pieces the K-quant dot products share.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/set/float_sums.h"
#include "kernels/set/kernel_set_namespace.h"
#include "kernels/set/kquant_blocks.h"

namespace k25::K25_KERNEL_SET {

inline int32_t kq_hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// For types with 16 sub-blocks of 16: from the 16 scale bytes, the int16 multipliers of the 32
// quants of group g (sub-blocks 2g and 2g + 1: eight lanes each).
inline __m256i kq_pair_scales_i8(__m128i scales, int g) {
  const __m128i pick = _mm_set_epi64x(static_cast<int64_t>(0x0101010101010101ull * (2 * g + 1)),
                                      static_cast<int64_t>(0x0101010101010101ull * (2 * g)));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick));
}

// For types with 16 sub-blocks of 16: sum[t] += the products of the 32 quants q of group g with
// token t's activations, times the scales of sub-blocks 2g and 2g + 1.
template <int NT>
[[gnu::always_inline]] inline void kq_add_group_products(__m256i* sum, __m256i q, __m128i sc8,
                                                         int g, const BlockQ8_K* const* x,
                                                         int64_t b) {
  const __m256i scale = kq_pair_scales_i8(sc8, g);
  for (int t = 0; t < NT; ++t) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs + 32 * g));
    sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), scale));
  }
}

// sum over 16 lanes of scales16[j] * bsums[j] (int16 each), in the 8 int32 lanes.
inline __m256i kq_scaled_bsums(__m256i scales16, const int16_t* bsums) {
  return _mm256_madd_epi16(scales16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)));
}

// Q4_K / Q5_K: the 8 scales (int16 lanes 0..7) and 8 minimums (lanes 8..15) of a block, unpacked
// in registers (as unpack_scales_mins_k4 does).
inline __m256i kq_scales_mins_k4(const uint8_t* p) {
  uint32_t a[3];
  std::memcpy(a, p, 12);
  const uint32_t sc_lo = a[0] & 0x3f3f3f3fu, mn_lo = a[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (a[2] & 0x0f0f0f0fu) | ((a[0] >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((a[2] >> 4) & 0x0f0f0f0fu) | ((a[1] >> 2) & 0x30303030u);
  return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(mn_hi), static_cast<int>(mn_lo),
                                            static_cast<int>(sc_hi), static_cast<int>(sc_lo)));
}

// Q3_K: the 16 scales minus 32 as int8 (as unpack_scales_q3_k does).
inline __m128i kq_scales_q3_k(const uint8_t* p) {
  uint32_t a[3];
  std::memcpy(a, p, 12);
  const uint32_t w0 = (a[0] & 0x0f0f0f0fu) | ((a[2] << 4) & 0x30303030u);
  const uint32_t w1 = (a[1] & 0x0f0f0f0fu) | ((a[2] << 2) & 0x30303030u);
  const uint32_t w2 = ((a[0] >> 4) & 0x0f0f0f0fu) | (a[2] & 0x30303030u);
  const uint32_t w3 = ((a[1] >> 4) & 0x0f0f0f0fu) | ((a[2] >> 2) & 0x30303030u);
  return _mm_sub_epi8(_mm_set_epi32(static_cast<int>(w3), static_cast<int>(w2),
                                    static_cast<int>(w1), static_cast<int>(w0)),
                      _mm_set1_epi8(32));
}

// For Q4_K / Q5_K: the products mins16[j] * (bsums[2j] + bsums[2j + 1]) over the 8 sub-blocks of
// 32, summed in pairs (4 int32 lanes).
inline __m128i kq_mins_products(__m128i mins16, const int16_t* bsums) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
  return _mm_madd_epi16(mins16, pairs);
}

inline __m128i kq_fold(__m256i v) {
  return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// The lane totals of a and of b, at once.
inline void kq_hsum2_i32(__m128i a, __m128i b, int32_t* sum_a, int32_t* sum_b) {
  __m128i h = _mm_hadd_epi32(a, b);  // a0+a1, a2+a3, b0+b1, b2+b3
  h = _mm_hadd_epi32(h, h);          // A, B, A, B
  *sum_a = _mm_cvtsi128_si32(h);
  *sum_b = _mm_extract_epi32(h, 1);
}

// The lane totals of four vectors: [total(a0), total(a1), total(a2), total(a3)].
inline __m128i kq_totals4(__m128i a0, __m128i a1, __m128i a2, __m128i a3) {
  return _mm_hadd_epi32(_mm_hadd_epi32(a0, a1), _mm_hadd_epi32(a2, a3));
}

// The Q8_K scales of block b of four activation rows.
inline __m128 kq_act_scales4(const BlockQ8_K* const* x, int64_t b) {
  return _mm_set_ps(x[3][b].d, x[2][b].d, x[1][b].d, x[0][b].d);
}

// kq_accumulate for four tokens at once: lane t is fma(d * dx[t], sumi[t], acc[t]), the same
// operations as the scalar form.
inline __m128 kq_accumulate4(__m128 acc, float d, __m128 dx, __m128i sumi) {
  return _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(d), dx), _mm_cvtepi32_ps(sumi), acc);
}
// The minimums' step: fma(-(dmin * dx[t]), summ[t], acc[t]).
inline __m128 kq_subtract4(__m128 acc, float dmin, __m128 dx, __m128i summ) {
  return _mm_fnmadd_ps(_mm_mul_ps(_mm_set1_ps(dmin), dx), _mm_cvtepi32_ps(summ), acc);
}

// The end of a super-block for the types with minimums (Q2_K, Q4_K, Q5_K): sum[t] holds the
// scaled quant products and mins[t] the minimums' products of token t (int32 lanes, any split);
// adds d * dx * total(sum) and subtracts dmin * dx * total(mins), in acc4 for NT == 4, else acc[t].
template <int NT>
[[gnu::always_inline]] inline void kq_add_affine(float* acc, __m128* acc4, float d, float dmin,
                                                 const BlockQ8_K* const* x, int64_t b,
                                                 const __m256i* sum, const __m128i* mins) {
  if constexpr (NT == 4) {
    const __m128 dx = kq_act_scales4(x, b);
    const __m128i sumi =
        kq_totals4(kq_fold(sum[0]), kq_fold(sum[1]), kq_fold(sum[2]), kq_fold(sum[3]));
    const __m128i summ = kq_totals4(mins[0], mins[1], mins[2], mins[3]);
    *acc4 = kq_subtract4(kq_accumulate4(*acc4, d, dx, sumi), dmin, dx, summ);
  } else {
    for (int t = 0; t < NT; ++t) {
      int32_t sumi, summ;
      kq_hsum2_i32(kq_fold(sum[t]), mins[t], &sumi, &summ);
      acc[t] = kq_accumulate(acc[t], d * x[t][b].d, sumi);
      acc[t] = kq_accumulate(acc[t], -(dmin * x[t][b].d), summ);
    }
  }
}

// The same for the types with an offset instead (Q3_K: q - 4, Q6_K: q - 32, offset = 1 << Shift):
// sum[t] holds the products of the unsigned quants, sc8 the 16 int8 scales; subtracts offset *
// (scale * bsum) per sub-block and adds d * dx * the total.
template <int NT, int Shift>
[[gnu::always_inline]] inline void kq_add_offset(float* acc, __m128* acc4, float d,
                                                 const BlockQ8_K* const* x, int64_t b,
                                                 const __m256i* sum, __m128i sc8) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
  __m256i net[NT];
  for (int t = 0; t < NT; ++t) {
    net[t] =
        _mm256_sub_epi32(sum[t], _mm256_slli_epi32(kq_scaled_bsums(sc16, x[t][b].bsums), Shift));
  }
  if constexpr (NT == 4) {
    *acc4 = kq_accumulate4(
        *acc4, d, kq_act_scales4(x, b),
        kq_totals4(kq_fold(net[0]), kq_fold(net[1]), kq_fold(net[2]), kq_fold(net[3])));
  } else {
    for (int t = 0; t < NT; ++t) acc[t] = kq_accumulate(acc[t], d * x[t][b].d, kq_hsum_i32(net[t]));
  }
}

// Writes the NT results: acc4 for NT == 4, else acc[0..NT).
template <int NT>
[[gnu::always_inline]] inline void kq_store_rows(const float* acc, __m128 acc4, float* out) {
  if constexpr (NT == 4) {
    _mm_storeu_ps(out, acc4);
  } else {
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
}

}  // namespace k25::K25_KERNEL_SET
#endif
