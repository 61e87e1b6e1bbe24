// Q4_K: 8 sub-blocks of 32 four-bit quants with 6-bit scales and minimums (layout in
// kquant_blocks.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/set/kquant_k4.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
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
// The low and high nibbles of 32 bytes.
struct Q4kQuants {
  explicit Q4kQuants(const BlockQ4_K&) {}
  void next(const uint8_t* qs, __m256i* lo, __m256i* hi) const {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    *lo = _mm256_and_si256(raw, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
  }
};
#endif

}  // namespace

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  kq_k4_dequantize<BlockQ4_K>(src, dst, n, &decode_q4_k);
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

#if defined(__SSSE3__)
namespace {

// A block's exact integer dot sum_j sc[j] x (sum of q x) over its 8 sub-blocks: maddubs on the
// nibbles (pairs of at most 2 x 15 x 127, two of them added in int16), madd with the scale.
int32_t q4_k_block_dot(const BlockQ4_K& w, const BlockQ8_K& x, const uint8_t* sc) {
  const __m128i low4 = _mm_set1_epi8(0x0f);
  __m128i sum = _mm_setzero_si128();
  for (int k = 0; k < 4; ++k) {
    __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
    for (int v = 0; v < 2; ++v) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 32 * k + 16 * v));
      const int8_t* xq = x.qs + 64 * k + 16 * v;
      lo = _mm_add_epi16(lo,
                         _mm_maddubs_epi16(_mm_and_si128(raw, low4),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq))));
      hi = _mm_add_epi16(
          hi, _mm_maddubs_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + 32))));
    }
    sum = _mm_add_epi32(sum, _mm_madd_epi16(lo, _mm_set1_epi16(sc[2 * k])));
    sum = _mm_add_epi32(sum, _mm_madd_epi16(hi, _mm_set1_epi16(sc[2 * k + 1])));
  }
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
  return _mm_cvtsi128_si32(sum);
}

}  // namespace

// kq_k4_vec_dot_scalar's sums and accumulation, the quants' part 16 at a time.
float vec_dot_q4_k_scalar(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const BlockQ4_K*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  uint8_t sc[8], mn[8];
  for (int64_t i = 0; i < n / kQK; ++i) {
    unpack_scales_mins_k4(w[i].scales, sc, mn);
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += mn[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, q4_k_block_dot(w[i], x[i], sc));
    acc = kq_accumulate(acc, -(half_to_float(w[i].dmin) * x[i].d), summ);
  }
  return acc;
}
#else
float vec_dot_q4_k_scalar(const void* w, const void* x, int64_t n) {
  return kq_k4_vec_dot_scalar<BlockQ4_K>(w, x, n, &decode_q4_k);
}
#endif

K25_KQUANT_ROW_KERNELS(q4_k, BlockQ4_K, (kq_k4_rows<NT, Q4kQuants>))

}  // namespace k25::K25_KERNEL_SET
