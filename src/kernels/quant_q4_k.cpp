// Q4_K: 8 sub-blocks of 32 four-bit quants with 6-bit scales and minimums (layout in
// kquant_blocks.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kquant_avx2.h"
#include "kernels/kquant_blocks.h"
#include "kernels/quant_simd.h"

namespace k25 {
namespace {

void decode_q4_k(const BlockQ4_K& b, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      q[64 * j + l] = b.qs[32 * j + l] & 0xF;
      q[64 * j + 32 + l] = b.qs[32 * j + l] >> 4;
    }
  }
}

#if defined(__AVX2__)
template <int NT>
void q4_k_rows(const BlockQ4_K* w, const BlockQ8_K* const* x, int64_t nb, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  float acc[NT] = {};
  __m128 acc4 = _mm_setzero_ps();  // NT == 4: the four accumulators
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_K& blk = w[b];
    const __m256i scales_mins = kq_scales_mins_k4(blk.scales);
    const __m256i sc16 = _mm256_permute2x128_si256(scales_mins, scales_mins, 0x00);
    const __m128i mn16 = _mm256_extracti128_si256(scales_mins, 1);
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * j));
      const __m256i lo = _mm256_and_si256(raw, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      // Every int16 lane holds scale 2j (low nibbles) or 2j + 1 (high nibbles).
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
    const float d = half_to_float(blk.d), dmin = half_to_float(blk.dmin);
    if constexpr (NT == 4) {
      const __m128 dx = kq_act_scales4(x, b);
      const __m128i sumi =
          kq_totals4(kq_fold(sum[0]), kq_fold(sum[1]), kq_fold(sum[2]), kq_fold(sum[3]));
      const __m128i summ =
          kq_totals4(kq_mins_products(mn16, x[0][b].bsums), kq_mins_products(mn16, x[1][b].bsums),
                     kq_mins_products(mn16, x[2][b].bsums), kq_mins_products(mn16, x[3][b].bsums));
      acc4 = kq_subtract4(kq_accumulate4(acc4, d, dx, sumi), dmin, dx, summ);
    } else {
      for (int t = 0; t < NT; ++t) {
        int32_t sumi, summ;
        kq_hsum2_i32(kq_fold(sum[t]), kq_mins_products(mn16, x[t][b].bsums), &sumi, &summ);
        acc[t] = kq_accumulate(acc[t], d * x[t][b].d, sumi);
        acc[t] = kq_accumulate(acc[t], -(dmin * x[t][b].d), summ);
      }
    }
  }
  if constexpr (NT == 4) {
    _mm_storeu_ps(out, acc4);
  } else {
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
}
#endif

void q4_k_row_dot(const uint8_t* w_row, const BlockQ8_K* const* x, int nt, int64_t nb, float* out) {
  const auto* w = reinterpret_cast<const BlockQ4_K*>(w_row);
#if defined(__AVX2__)
  switch (nt) {
    case 1:
      return q4_k_rows<1>(w, x, nb, out);
    case 2:
      return q4_k_rows<2>(w, x, nb, out);
    case 3:
      return q4_k_rows<3>(w, x, nb, out);
    default:
      return q4_k_rows<4>(w, x, nb, out);
  }
#else
  for (int t = 0; t < nt; ++t) out[t] = vec_dot_q4_k_scalar(w, x[t], nb * kQK);
#endif
}

}  // namespace

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  uint8_t q[kQK], sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    decode_q4_k(b[i], q);
    unpack_scales_mins_k4(b[i].scales, sc, mn);
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      const float ds = d * static_cast<float>(sc[j]), dm = dmin * static_cast<float>(mn[j]);
      for (int l = 0; l < 32; ++l) dst[32 * j + l] = ds * q[32 * j + l] - dm;
    }
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    uint8_t L[kQK];
    kq_quantize_affine_k4(src, 15, L, &out[i].d, &out[i].dmin, out[i].scales);
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        out[i].qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
      }
    }
  }
}

float vec_dot_q4_k_scalar(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const BlockQ4_K*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  uint8_t q[kQK], sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i) {
    decode_q4_k(w[i], q);
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

float vec_dot_q4_k(const void* w, const void* x, int64_t n) {
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float out;
  q4_k_row_dot(static_cast<const uint8_t*>(w), &xb, 1, n / kQK, &out);
  return out;
}

void dot_tile_q4_k(const uint8_t* w, size_t w_row_bytes, int nr, const uint8_t* acts,
                   size_t act_row_bytes, int nt, int64_t n, float* y, int64_t y_stride) {
  kq_dot_tile(&q4_k_row_dot, w, w_row_bytes, nr, acts, act_row_bytes, nt, n, y, y_stride);
}

}  // namespace k25
