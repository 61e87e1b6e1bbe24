// Q3_K: 16 sub-blocks of 16 three-bit quants with 6-bit signed scales (layout in
// kquant_blocks.h). k25 reads it only (no encoder).
#include "kernels/set/kquant_avx2.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

// The 256 quants of a block, in -4..3.
void decode_q3_k(const BlockQ3_K& b, int8_t* q) {
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * n + l] >> (2 * j)) & 3;
        const int high = (b.hmask[l] >> (4 * n + j)) & 1;
        q[128 * n + 32 * j + l] = static_cast<int8_t>(low + 4 * high - 4);
      }
    }
  }
}

#if defined(__AVX2__)
template <int NT>
void q3_k_rows(const BlockQ3_K* w, const BlockQ8_K* const* x, int64_t nb, float* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i one = _mm256_set1_epi8(1);
  float acc[NT] = {};
  __m128 acc4 = _mm_setzero_ps();  // NT == 4: the four accumulators
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K& blk = w[b];
    const __m128i sc8 = kq_scales_q3_k(blk.scales);
    // Shifted right by one per group of 32: bit 0 of each byte is the group's high bit.
    __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * n));
      for (int j = 0; j < 4; ++j) {
        // Quants 0..7 (the -4 comes from the bsums).
        const __m256i q = _mm256_or_si256(_mm256_and_si256(raw, m3),
                                          _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
        raw = _mm256_srli_epi16(raw, 2);
        hm = _mm256_srli_epi16(hm, 1);
        kq_add_group_products<NT>(sum, q, sc8, 4 * n + j, x, b);
      }
    }
    // The -4 of every quant comes from the bsums.
    kq_add_offset<NT, 2>(acc, &acc4, half_to_float(blk.d), x, b, sum, sc8);
  }
  kq_store_rows<NT>(acc, acc4, out);
}
#endif

}  // namespace

void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  int8_t q[kQK], sc[16];
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    decode_q3_k(b[i], q);
    unpack_scales_q3_k(b[i].scales, sc);
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(sc[j / 16]) * q[j];
  }
}

float vec_dot_q3_k_scalar(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const BlockQ3_K*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  int8_t q[kQK], sc[16];
  for (int64_t i = 0; i < n / kQK; ++i) {
    decode_q3_k(w[i], q);
    unpack_scales_q3_k(w[i].scales, sc);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * j + l] * x[i].qs[16 * j + l];
      sumi += s * sc[j];
    }
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, sumi);
  }
  return acc;
}

K25_KQUANT_ROW_KERNELS(q3_k, BlockQ3_K, (q3_k_rows<NT>))

}  // namespace k25::K25_KERNEL_SET
