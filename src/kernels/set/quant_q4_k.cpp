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

#if defined(__SSSE3__)
// The low and high nibbles of 16 bytes (kq_k4_vec_dot_ssse3).
struct Q4kQuants16 {
  explicit Q4kQuants16(const BlockQ4_K&) {}
  void next(const uint8_t* qs, int, int, __m128i* lo, __m128i* hi) const {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    *lo = _mm_and_si128(raw, m4);
    *hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
  }
};
#endif

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
float vec_dot_q4_k_scalar(const void* w, const void* x, int64_t n) {
  return kq_k4_vec_dot_ssse3<BlockQ4_K, Q4kQuants16>(w, x, n);
}
#else
float vec_dot_q4_k_scalar(const void* w, const void* x, int64_t n) {
  return kq_k4_vec_dot_scalar<BlockQ4_K>(w, x, n, &decode_q4_k);
}
#endif

K25_KQUANT_ROW_KERNELS(q4_k, BlockQ4_K, (kq_k4_rows<NT, Q4kQuants>))

}  // namespace k25::K25_KERNEL_SET
