// Q2_K: 16 sub-blocks of 16 two-bit quants with a 4-bit scale and minimum each (layout in
// kquant_blocks.h). k25 reads it only (no encoder).
#include "kernels/set/kquant_avx2.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

void decode_q2_k(const BlockQ2_K& b, uint8_t* q) {
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        q[128 * n + 32 * j + l] = static_cast<uint8_t>((b.qs[32 * n + l] >> (2 * j)) & 3);
      }
    }
  }
}

#if defined(__AVX2__)
template <int NT>
void q2_k_rows(const BlockQ2_K* w, const BlockQ8_K* const* x, int64_t nb, float* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  float acc[NT] = {};
  __m128 acc4 = _mm_setzero_ps();  // NT == 4: the four accumulators
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ2_K& blk = w[b];
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    const __m128i sc8 = _mm_and_si128(packed, m4);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * n));
      for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_and_si256(raw, m3);
        raw = _mm256_srli_epi16(raw, 2);
        kq_add_group_products<NT>(sum, q, sc8, 4 * n + j, x, b);
      }
    }
    const float d = half_to_float(blk.d), dmin = half_to_float(blk.dmin);
    __m128i mins[NT];
    for (int t = 0; t < NT; ++t) mins[t] = kq_fold(kq_scaled_bsums(mins16, x[t][b].bsums));
    kq_add_affine<NT>(acc, &acc4, d, dmin, x, b, sum, mins);
  }
  kq_store_rows<NT>(acc, acc4, out);
}
#endif

}  // namespace

void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  uint8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    decode_q2_k(b[i], q);
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const float ds = d * static_cast<float>(b[i].scales[j] & 0xF);
      const float dm = dmin * static_cast<float>(b[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) dst[16 * j + l] = ds * q[16 * j + l] - dm;
    }
  }
}

float vec_dot_q2_k_scalar(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const BlockQ2_K*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  uint8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    decode_q2_k(w[i], q);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * j + l] * x[i].qs[16 * j + l];
      sumi += s * (w[i].scales[j] & 0xF);
      summ += (w[i].scales[j] >> 4) * x[i].bsums[j];
    }
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, sumi);
    acc = kq_accumulate(acc, -(half_to_float(w[i].dmin) * x[i].d), summ);
  }
  return acc;
}

K25_KQUANT_ROW_KERNELS(q2_k, BlockQ2_K, (q2_k_rows<NT>))

}  // namespace k25::K25_KERNEL_SET
