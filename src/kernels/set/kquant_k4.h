// Internal to src/kernels: what Q4_K and Q5_K share (the same 8 sub-blocks of 32 with 6-bit scales
// and minimums; Q5_K adds a fifth quant bit). Each type supplies only how its quants are produced.
#pragma once

#include <cstdint>

#include "kernels/set/float_sums.h"
#include "kernels/set/kernel_set_namespace.h"
#include "kernels/set/kquant_avx2.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"

namespace k25::K25_KERNEL_SET {

// Decode(block, q) writes the 256 quants of a block in element order.
template <typename Block, typename Decode>
[[gnu::always_inline]] inline void kq_k4_dequantize(const void* src, float* dst, int64_t n,
                                                    Decode decode) {
  const auto* b = static_cast<const Block*>(src);
  uint8_t q[kQK], sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    decode(b[i], q);
    unpack_scales_mins_k4(b[i].scales, sc, mn);
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      const float ds = d * static_cast<float>(sc[j]), dm = dmin * static_cast<float>(mn[j]);
      for (int l = 0; l < 32; ++l) dst[32 * j + l] = ds * q[32 * j + l] - dm;
    }
  }
}

template <typename Block, typename Decode>
[[gnu::always_inline]] inline float kq_k4_vec_dot_scalar(const void* wv, const void* xv, int64_t n,
                                                         Decode decode) {
  const auto* w = static_cast<const Block*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  uint8_t q[kQK], sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i) {
    decode(w[i], q);
    unpack_scales_mins_k4(w[i].scales, sc, mn);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) s += q[32 * j + l] * x[i].qs[32 * j + l];
      sumi += s * sc[j];
      summ += mn[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, sumi);
    acc = kq_accumulate(acc, -(half_to_float(w[i].dmin) * x[i].d), summ);
  }
  return acc;
}

#if defined(__SSSE3__)
// kq_k4_vec_dot_scalar's sums and accumulation, the quants' part 16 at a time, exactly: Quants
// is constructed from each block and next(qs, j, v, &lo, &hi) gives quants 16 v .. 16 v + 15 of
// sub-blocks 2j (lo) and 2j + 1 (hi) from the 16 bytes at qs = blk.qs + 32 j + 16 v. maddubs
// pairs are at most 2 x 31 x 127, two of them added in int16, then madd by the sub-block scale.
template <typename Block, typename Quants>
[[gnu::always_inline]] inline float kq_k4_vec_dot_ssse3(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const Block*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  uint8_t sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i) {
    unpack_scales_mins_k4(w[i].scales, sc, mn);
    Quants quants(w[i]);
    __m128i sum = _mm_setzero_si128();
    for (int j = 0; j < 4; ++j) {
      __m128i lo_sum = _mm_setzero_si128(), hi_sum = _mm_setzero_si128();
      for (int v = 0; v < 2; ++v) {
        __m128i lo, hi;
        quants.next(w[i].qs + 32 * j + 16 * v, j, v, &lo, &hi);
        const int8_t* xq = x[i].qs + 64 * j + 16 * v;
        lo_sum = _mm_add_epi16(
            lo_sum, _mm_maddubs_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq))));
        hi_sum = _mm_add_epi16(
            hi_sum,
            _mm_maddubs_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + 32))));
      }
      sum = _mm_add_epi32(sum, _mm_madd_epi16(lo_sum, _mm_set1_epi16(sc[2 * j])));
      sum = _mm_add_epi32(sum, _mm_madd_epi16(hi_sum, _mm_set1_epi16(sc[2 * j + 1])));
    }
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += mn[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, hsum_i32(sum));
    acc = kq_accumulate(acc, -(half_to_float(w[i].dmin) * x[i].d), summ);
  }
  return acc;
}
#endif

#if defined(__AVX2__)
// One weight row against NT activation rows. Quants is constructed from each block and its
// next(qs, &lo, &hi), called for j = 0..3 in order, gives the 32 quants of sub-blocks 2j (lo) and
// 2j + 1 (hi) from the 32 bytes at qs = blk.qs + 32 j.
template <int NT, typename Quants, typename Block>
[[gnu::always_inline]] inline void kq_k4_rows(const Block* w, const BlockQ8_K* const* x, int64_t nb,
                                              float* out) {
  float acc[NT] = {};
  __m128 acc4 = _mm_setzero_ps();  // NT == 4: the four accumulators
  for (int64_t b = 0; b < nb; ++b) {
    const Block& blk = w[b];
    const __m256i scales_mins = kq_scales_mins_k4(blk.scales);
    const __m256i sc16 = _mm256_permute2x128_si256(scales_mins, scales_mins, 0x00);
    const __m128i mn16 = _mm256_extracti128_si256(scales_mins, 1);
    Quants quants(blk);
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      __m256i lo, hi;
      quants.next(blk.qs + 32 * j, &lo, &hi);
      // Every int16 lane holds scale 2j (lo) or 2j + 1 (hi).
      const __m256i s_lo = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * 2 * j)));
      const __m256i s_hi = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * j + 1))));
      for (int t = 0; t < NT; ++t) {
        const int8_t* xq = x[t][b].qs + 64 * j;
        const __m256i p_lo = _mm256_madd_epi16(
            _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
            s_lo);
        const __m256i p_hi = _mm256_madd_epi16(
            _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32))),
            s_hi);
        sum[t] = _mm256_add_epi32(sum[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    __m128i mins[NT];
    for (int t = 0; t < NT; ++t) mins[t] = kq_mins_products(mn16, x[t][b].bsums);
    kq_add_affine<NT>(acc, &acc4, half_to_float(blk.d), half_to_float(blk.dmin), x, b, sum, mins);
  }
  kq_store_rows<NT>(acc, acc4, out);
}
#endif

}  // namespace k25::K25_KERNEL_SET
