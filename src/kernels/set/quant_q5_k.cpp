// Q5_K: Q4_K's sub-blocks and scales with a fifth quant bit (layout in kquant_blocks.h).
#include <cstring>

#include "kernels/set/kquant_k4.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

void decode_q5_k(const BlockQ5_K& b, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      q[64 * j + l] =
          static_cast<uint8_t>((b.qs[32 * j + l] & 0xF) | (((b.qh[l] >> (2 * j)) & 1) << 4));
      q[64 * j + 32 + l] =
          static_cast<uint8_t>((b.qs[32 * j + l] >> 4) | (((b.qh[l] >> (2 * j + 1)) & 1) << 4));
    }
  }
}

#if defined(__SSSE3__)
// Q4_K's nibbles of 16 bytes with their fifth bits: bit 2j (lo) and 2j + 1 (hi) of
// qh[16 v .. 16 v + 15] (kq_k4_vec_dot_ssse3).
struct Q5kQuants16 {
  const uint8_t* qh;
  explicit Q5kQuants16(const BlockQ5_K& b) : qh(b.qh) {}
  void next(const uint8_t* qs, int j, int v, __m128i* lo, __m128i* hi) const {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i one = _mm_set1_epi8(1);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16 * v));
    // 16-bit shifts by at most 7 keep bit 0 of each byte that byte's own bit.
    const __m128i low_bit = _mm_and_si128(_mm_srl_epi16(hb, _mm_cvtsi32_si128(2 * j)), one);
    const __m128i high_bit = _mm_and_si128(_mm_srl_epi16(hb, _mm_cvtsi32_si128(2 * j + 1)), one);
    *lo = _mm_or_si128(_mm_and_si128(raw, m4), _mm_slli_epi16(low_bit, 4));
    *hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_slli_epi16(high_bit, 4));
  }
};
#endif

#if defined(__AVX2__)
// Q4_K's nibbles with the fifth bits from qh.
struct Q5kQuants {
  // Shifted right by 2 per group of 64, so bits 0 and 1 of each byte are the group's fifth bits.
  __m256i hb;
  explicit Q5kQuants(const BlockQ5_K& b)
      : hb(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh))) {}
  void next(const uint8_t* qs, __m256i* lo, __m256i* hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    *lo =
        _mm256_or_si256(_mm256_and_si256(raw, m4), _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
    hb = _mm256_srli_epi16(hb, 2);
  }
};
#endif

}  // namespace

void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  kq_k4_dequantize<BlockQ5_K>(src, dst, n, &decode_q5_k);
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    uint8_t L[kQK];
    kq_quantize_affine_k4(src, 31, L, &out[i].d, &out[i].dmin, out[i].scales);
    std::memset(out[i].qh, 0, sizeof(out[i].qh));
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t a = L[64 * j + l], b = L[64 * j + 32 + l];
        out[i].qs[32 * j + l] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
        out[i].qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * j)) | ((b >> 4) << (2 * j + 1)));
      }
    }
  }
}

#if defined(__SSSE3__)
float vec_dot_q5_k_scalar(const void* w, const void* x, int64_t n) {
  return kq_k4_vec_dot_ssse3<BlockQ5_K, Q5kQuants16>(w, x, n);
}
#else
float vec_dot_q5_k_scalar(const void* w, const void* x, int64_t n) {
  return kq_k4_vec_dot_scalar<BlockQ5_K>(w, x, n, &decode_q5_k);
}
#endif

K25_KQUANT_ROW_KERNELS(q5_k, BlockQ5_K, (kq_k4_rows<NT, Q5kQuants>))

}  // namespace k25::K25_KERNEL_SET
