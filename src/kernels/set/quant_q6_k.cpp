// Q6_K: 16 sub-blocks of 16 six-bit quants with int8 scales (layout in kquant_blocks.h).
#include <algorithm>
#include <cstring>

#include "kernels/set/float_sums.h"
#include "kernels/set/kquant_avx2.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

// The 256 quants of a block, minus 32.
void decode_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    int8_t* out = q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

#if defined(__AVX2__)
template <int NT>
void q6_k_rows(const BlockQ6_K* w, const BlockQ8_K* const* x, int64_t nb, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  float acc[NT] = {};
  __m128 acc4 = _mm_setzero_ps();  // NT == 4: the four accumulators
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& blk = w[b];
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      // Quants 0..63 of the four groups of 32 in this half (the -32 comes from the bsums).
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4),
                          _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x03)), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, m4),
                          _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0C)), 2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                          _mm256_and_si256(hb, _mm256_set1_epi8(0x30))),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                          _mm256_srli_epi16(
                              _mm256_and_si256(hb, _mm256_set1_epi8(static_cast<char>(0xC0))), 2)),
      };
      for (int k = 0; k < 4; ++k) {
        kq_add_group_products<NT>(sum, q[k], sc8, 4 * h + k, x, b);
      }
    }
    // The -32 of every quant comes from the bsums.
    kq_add_offset<NT, 5>(acc, &acc4, half_to_float(blk.d), x, b, sum, sc8);
  }
  kq_store_rows<NT>(acc, acc4, out);
}
#endif

}  // namespace

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    decode_q6_k(b[i], q);
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(b[i].scales[j / 16]) * q[j];
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    BlockQ6_K& b = out[i];
    uint8_t L[kQK];
    float scales[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = kq_fit_symmetric(src + 16 * j, 16, 32, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(&b, 0, sizeof(b));
    if (amax < 1e-30f) {
      std::fill(L, L + kQK, uint8_t{32});
    } else {
      // The largest scale maps to -128, the others in proportion; then each sub-block's quants
      // are refit to the rounded scale.
      const float iscale = -128.0f / max_scale;
      b.d = float_to_half(1.0f / iscale);
      const float d = half_to_float(b.d);
      for (int j = 0; j < 16; ++j) {
        b.scales[j] = static_cast<int8_t>(std::min(127, kq_nearest(iscale * scales[j])));
        const float ds = d * static_cast<float>(b.scales[j]);
        for (int l = 0; l < 16; ++l) {
          const int q = ds == 0.0f ? 0 : std::clamp(kq_nearest(src[16 * j + l] / ds), -32, 31);
          L[16 * j + l] = static_cast<uint8_t>(q + 32);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        b.ql[64 * h + l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
        b.ql[64 * h + l + 32] = static_cast<uint8_t>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
        b.qh[32 * h + l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                                ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
  }
}

namespace {

// A block's exact integer dot: sum over sub-blocks j of scales[j] x (sum of (q - 32) x).
#if defined(__SSSE3__)
// 16 unsigned 6-bit quants per sub-block against the activations (maddubs: pairs of at most
// 2 x 63 x 127), weighted by the sub-block's scale (madd); the -32 comes from the bsums.
int32_t q6_k_block_dot(const BlockQ6_K& w, const BlockQ8_K& x) {
  const __m128i low4 = _mm_set1_epi8(0x0f);
  __m128i sum = _mm_setzero_si128();
  for (int h = 0; h < 2; ++h) {
    for (int v = 0; v < 2; ++v) {  // quants 16 v .. 16 v + 15 of each group of 32
      const __m128i l0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.ql + 64 * h + 16 * v));
      const __m128i l1 =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.ql + 64 * h + 32 + 16 * v));
      const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qh + 32 * h + 16 * v));
      const __m128i q[4] = {
          _mm_or_si128(_mm_and_si128(l0, low4),
                       _mm_slli_epi16(_mm_and_si128(hb, _mm_set1_epi8(0x03)), 4)),
          _mm_or_si128(_mm_and_si128(l1, low4),
                       _mm_slli_epi16(_mm_and_si128(hb, _mm_set1_epi8(0x0c)), 2)),
          _mm_or_si128(_mm_and_si128(_mm_srli_epi16(l0, 4), low4),
                       _mm_and_si128(hb, _mm_set1_epi8(0x30))),
          _mm_or_si128(
              _mm_and_si128(_mm_srli_epi16(l1, 4), low4),
              _mm_srli_epi16(_mm_and_si128(hb, _mm_set1_epi8(static_cast<char>(0xc0))), 2)),
      };
      for (int k = 0; k < 4; ++k) {
        const int j = 8 * h + 2 * k + v;  // the sub-block
        const __m128i xq = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 16 * j));
        sum = _mm_add_epi32(
            sum, _mm_madd_epi16(_mm_maddubs_epi16(q[k], xq), _mm_set1_epi16(w.scales[j])));
      }
    }
  }
  const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
  const __m128i offset =
      _mm_add_epi32(_mm_madd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums)),
                                   _mm_cvtepi8_epi16(scales)),
                    _mm_madd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums + 8)),
                                   _mm_cvtepi8_epi16(_mm_srli_si128(scales, 8))));
  return hsum_i32(_mm_sub_epi32(sum, _mm_slli_epi32(offset, 5)));
}
#else
int32_t q6_k_block_dot(const BlockQ6_K& w, const BlockQ8_K& x) {
  int8_t q[kQK];
  decode_q6_k(w, q);
  int32_t sumi = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) s += q[16 * j + l] * x.qs[16 * j + l];
    sumi += s * w.scales[j];
  }
  return sumi;
}
#endif

}  // namespace

float vec_dot_q6_k_scalar(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(wv);
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = kq_accumulate(acc, half_to_float(w[i].d) * x[i].d, q6_k_block_dot(w[i], x[i]));
  }
  return acc;
}

K25_KQUANT_ROW_KERNELS(q6_k, BlockQ6_K, (q6_k_rows<NT>))

}  // namespace k25::K25_KERNEL_SET
