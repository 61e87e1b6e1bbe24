// IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256): 4-bit indices into a non-linear table
// (see kernels/block_types.h). A block of 32 holds element j's index in byte j % 16 of its 16
// bytes (low nibble for j < 16, high nibble for j >= 16); x = d kValues[index].
//   IQ4_NL: f16 d per block of 32; dots against Q8_0 activations.
//   IQ4_XS: f16 d per 256, and per block of 32 a 6-bit scale ls (low 4 bits in scales_l, high
//           2 bits in scales_h), x = d (ls - 32) kValues[index]; dots against Q8_K.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/block_types.h"
#include "kernels/quant.h"
#include "kernels/set/block_dot_lanes.h"
#include "kernels/set/block_kernels_table.h"
#include "kernels/set/block_types_portable.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

struct BlockIQ4_NL {
  uint16_t d;  // f16
  uint8_t qs[16];
};
struct BlockIQ4_XS {
  uint16_t d;  // f16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

int index_of(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

// The 6-bit scale of block ib (0..7) of a super-block, minus its offset 32.
int xs_scale(const BlockIQ4_XS& x, int ib) {
  const int low = (x.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
  const int high = (x.scales_h >> (2 * ib)) & 3;
  return (low | high << 4) - 32;
}

// ---- dequantize ----

void dequantize_block(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(kValues[index_of(qs, j)]);
}

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n / 32; ++b)
    dequantize_block(x[b].qs, half_to_float(x[b].d), dst + 32 * b);
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n / 256; ++b) {
    const float d = half_to_float(x[b].d);
    for (int ib = 0; ib < 8; ++ib) {
      dequantize_block(x[b].qs + 16 * ib, d * static_cast<float>(xs_scale(x[b], ib)),
                       dst + 256 * b + 32 * ib);
    }
  }
}

// ---- quantize: llama.cpp's search without an importance matrix (weights x^2) ----

// The index of the table value nearest to v; a tie goes to the larger value. v picks index i
// once 2 v reaches kValues[i - 1] + kValues[i] (both sides exact, as llama.cpp compares them).
int nearest_index(float v) {
  const float twice = v + v;
  int i = 0;
  while (i < 15 && twice >= static_cast<float>(kValues[i] + kValues[i + 1])) ++i;
  return i;
}

// The weighted least-squares scale of 32 values for the indices that 1 / inv_scale gives, with
// sum(w q x) in *sum_qx and sum(w q^2) in *sum_q2.
void fit_scale(const float* x, float inv_scale, float* sum_qx, float* sum_q2) {
  float qx = 0.0f, q2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float q = kValues[nearest_index(inv_scale * x[j])];
    const float w = x[j] * x[j];
    qx += w * q * x[j];
    q2 += w * q * q;
  }
  *sum_qx = qx;
  *sum_q2 = q2;
}

// The scale of one block of 32: start from the value of largest magnitude on the table's end
// (-127), then try 15 nearby starting points and keep the best least-squares fit.
float block_scale(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < 1e-15f) return 0.0f;
  float sum_qx, sum_q2;
  fit_scale(x, 1.0f / (-max / kValues[0]), &sum_qx, &sum_q2);
  float d = sum_q2 > 0.0f ? sum_qx / sum_q2 : 0.0f;
  float best = d * sum_qx;
  for (int t = -7; t <= 7; ++t) {
    fit_scale(x, static_cast<float>(t + kValues[0]) / max, &sum_qx, &sum_q2);
    if (sum_q2 > 0.0f && sum_qx * sum_qx > best * sum_q2) {
      d = sum_qx / sum_q2;
      best = d * sum_qx;
    }
  }
  return d;
}

void pack_indices(const float* x, float inv_scale, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(nearest_index(inv_scale * x[j]) |
                                 nearest_index(inv_scale * x[j + 16]) << 4);
  }
}

void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    const float d = block_scale(src);
    y[b].d = float_to_half(d);
    pack_indices(src, d != 0.0f ? 1.0f / d : 0.0f, y[b].qs);
  }
}

// Each block's scale as a 6-bit multiple of d = -(the scale of largest magnitude) / 32.
void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    float scales[8];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      scales[ib] = block_scale(src + 32 * ib);
      if (std::fabs(scales[ib]) > amax_scale) {
        amax_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    const float d = -max_scale / 32.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = float_to_half(d);
    y[b].scales_h = 0;
    std::memset(y[b].scales_l, 0, sizeof(y[b].scales_l));
    for (int ib = 0; ib < 8; ++ib) {
      const int l = std::clamp(static_cast<int>(std::nearbyint(id * scales[ib])), -32, 31);
      const float dl = d * static_cast<float>(l);
      pack_indices(src + 32 * ib, dl != 0.0f ? 1.0f / dl : 0.0f, y[b].qs + 16 * ib);
      const int ls = l + 32;
      y[b].scales_l[ib / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (ib % 2)));
      y[b].scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * ib));
    }
  }
}

// ---- portable dot products ----

int32_t block_isum(const uint8_t* qs, const int8_t* a) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += kValues[index_of(qs, j)] * a[j];
  return isum;
}

void block_iq4_nl(const BlockIQ4_NL& w, const BlockQ8_0& a, int64_t b, float* lanes) {
  lane_fma(lanes, b, half_to_float(w.d) * half_to_float(a.d),
           static_cast<float>(block_isum(w.qs, a.qs)));
}

void superblock_iq4_xs(const BlockIQ4_XS& w, const BlockQ8_K& a, int64_t b, float* lanes) {
  int32_t isum = 0;
  for (int ib = 0; ib < 8; ++ib)
    isum += xs_scale(w, ib) * block_isum(w.qs + 16 * ib, a.qs + 32 * ib);
  lane_fma(lanes, b, half_to_float(w.d) * a.d, static_cast<float>(isum));
}

float vec_dot_iq4_nl_portable(const void* w, const void* a, int64_t n) {
  return dot_blocks_portable(static_cast<const BlockIQ4_NL*>(w), static_cast<const BlockQ8_0*>(a),
                             n / 32, block_iq4_nl);
}
float vec_dot_iq4_xs_portable(const void* w, const void* a, int64_t n) {
  return dot_blocks_portable(static_cast<const BlockIQ4_XS*>(w), static_cast<const BlockQ8_K*>(a),
                             n / 256, superblock_iq4_xs);
}

// ---- AVX2: the table lookup is one pshufb per 32 indices ----

#if defined(__AVX2__)
__m256i table_values(const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValues)));
  return _mm256_shuffle_epi8(table, unpack_nibbles32(qs));
}

__m256i acts32(const int8_t* qs) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

float vec_dot_iq4_nl_avx2(const void* w, const void* a, int64_t n) {
  const auto isum = [](const BlockIQ4_NL& x, const BlockQ8_0& y) {
    return dot_s8_s8(table_values(x.qs), acts32(y.qs));
  };
  return dot_blocks32_avx2<false>(static_cast<const BlockIQ4_NL*>(w),
                                  static_cast<const BlockQ8_0*>(a), n / 32, isum, block_iq4_nl);
}

int32_t sum_i32x8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Per super-block the integer sum of (ls - 32) times each block's products, as the portable
// path computes it; then the same lane arithmetic.
float vec_dot_iq4_xs_avx2(const void* w_row, const void* a_row, int64_t n) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float lanes[kDotLanes] = {};
  for (int64_t b = 0; b < n / 256; ++b) {
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i v = table_values(w[b].qs + 16 * ib);
      const __m256i y = acts32(a[b].qs + 32 * ib);
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
      const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(xs_scale(w[b], ib)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scale));
    }
    lane_fma(lanes, b, half_to_float(w[b].d) * a[b].d, static_cast<float>(sum_i32x8(acc)));
  }
  return sum_lanes(lanes);
}
#endif

constexpr BlockTypeKernels kIQ4_NLPortable{ActFormat::kQ8_0, dequantize_iq4_nl, quantize_iq4_nl,
                                           vec_dot_iq4_nl_portable, nullptr};
constexpr BlockTypeKernels kIQ4_XSPortable{ActFormat::kQ8_K, dequantize_iq4_xs, quantize_iq4_xs,
                                           vec_dot_iq4_xs_portable, nullptr};
#if defined(__AVX2__)
constexpr BlockTypeKernels kIQ4_NL = with_vec_dot(kIQ4_NLPortable, vec_dot_iq4_nl_avx2);
constexpr BlockTypeKernels kIQ4_XS = with_vec_dot(kIQ4_XSPortable, vec_dot_iq4_xs_avx2);
#else
constexpr const BlockTypeKernels& kIQ4_NL = kIQ4_NLPortable;
constexpr const BlockTypeKernels& kIQ4_XS = kIQ4_XSPortable;
#endif

}  // namespace

const BlockTypeKernels* iq4_block_kernels(DType type) {
  static constexpr BlockKernelsEntry kTable[] = {{DType::IQ4_NL, &kIQ4_NL},
                                                 {DType::IQ4_XS, &kIQ4_XS}};
  return find_block_kernels(kTable, type);
}

const BlockTypeKernels* iq4_block_kernels_portable(DType type) {
  static constexpr BlockKernelsEntry kTable[] = {{DType::IQ4_NL, &kIQ4_NLPortable},
                                                 {DType::IQ4_XS, &kIQ4_XSPortable}};
  return find_block_kernels(kTable, type);
}

}  // namespace k25::K25_KERNEL_SET
