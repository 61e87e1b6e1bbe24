// Q4_1, Q5_0 and Q5_1: blocks of 32 (see kernels/block_types.h). Element j of a block has its
// low 4 bits in byte j % 16 of qs (low nibble for j < 16, high nibble for j >= 16) and, for the
// 5-bit types, its fifth bit in bit j of the little-endian 32-bit qh.
//   Q4_1: x = q d + m     Q5_0: x = (q - 16) d     Q5_1: x = q d + m
// Q4_1 and Q5_1 dot against Q8_1 activations (d_w d_a sum(q_w q_a) + m_w s_a), Q5_0 against
// Q8_0, as llama.cpp does.
#include <algorithm>
#include <cfloat>
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

struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);

uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

void store_qh(uint32_t v, uint8_t* qh) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(v >> (8 * i));
}

// The 4-bit (and with qh the 5-bit) quant of element j.
int nibble(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}
int quint(const uint8_t* qs, uint32_t qh, int j) {
  return nibble(qs, j) | static_cast<int>((qh >> j) & 1) << 4;
}

// Packs 32 quants of up to 5 bits into qs (and the fifth bits into qh).
void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
}
uint32_t fifth_bits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return qh;
}

// ---- dequantize ----

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / 32; ++b, dst += 32) {
    const float d = half_to_float(x[b].d), m = half_to_float(x[b].m);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(nibble(x[b].qs, j)) * d + m;
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / 32; ++b, dst += 32) {
    const float d = half_to_float(x[b].d);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(quint(x[b].qs, qh, j) - 16) * d;
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / 32; ++b, dst += 32) {
    const float d = half_to_float(x[b].d), m = half_to_float(x[b].m);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(quint(x[b].qs, qh, j)) * d + m;
  }
}

// ---- quantize (the GGUF reference encoders: scale and minimum from the block's range) ----

void min_max(const float* x, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
}

// Q4_1 / Q5_1: the scale (max - min) / nmax, the minimum, and q[j] in 0..nmax.
void quantize_affine32(const float* x, int nmax, uint16_t* d_out, uint16_t* m_out, int* q) {
  float min, max;
  min_max(x, min, max);
  const float d = (max - min) / static_cast<float>(nmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = float_to_half(d);
  *m_out = float_to_half(min);
  for (int j = 0; j < 32; ++j) q[j] = std::min(nmax, static_cast<int>((x[j] - min) * id + 0.5f));
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    int q[32];
    quantize_affine32(src, 15, &y[b].d, &y[b].m, q);
    pack_nibbles(q, y[b].qs);
  }
}

// The value of largest magnitude maps to -16; the rest round to nearest, 31 at most.
void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = float_to_half(d);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = std::min(31, static_cast<int>(src[j] * id + 16.5f));
    pack_nibbles(q, y[b].qs);
    store_qh(fifth_bits(q), y[b].qh);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    int q[32];
    quantize_affine32(src, 31, &y[b].d, &y[b].m, q);
    pack_nibbles(q, y[b].qs);
    store_qh(fifth_bits(q), y[b].qh);
  }
}

// ---- portable dot products, one block at a time ----

void block_q4_1(const BlockQ4_1& w, const BlockQ8_1& a, int64_t b, float* lanes) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += nibble(w.qs, j) * a.qs[j];
  lane_fma(lanes, b, half_to_float(w.d) * half_to_float(a.d), static_cast<float>(isum));
  lane_fma(lanes, b, half_to_float(w.m), half_to_float(a.s));
}

void block_q5_0(const BlockQ5_0& w, const BlockQ8_0& a, int64_t b, float* lanes) {
  const uint32_t qh = load_qh(w.qh);
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += (quint(w.qs, qh, j) - 16) * a.qs[j];
  lane_fma(lanes, b, half_to_float(w.d) * half_to_float(a.d), static_cast<float>(isum));
}

void block_q5_1(const BlockQ5_1& w, const BlockQ8_1& a, int64_t b, float* lanes) {
  const uint32_t qh = load_qh(w.qh);
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += quint(w.qs, qh, j) * a.qs[j];
  lane_fma(lanes, b, half_to_float(w.d) * half_to_float(a.d), static_cast<float>(isum));
  lane_fma(lanes, b, half_to_float(w.m), half_to_float(a.s));
}

float vec_dot_q4_1_portable(const void* w, const void* a, int64_t n) {
  return dot_blocks_portable(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a),
                             n / 32, block_q4_1);
}
float vec_dot_q5_0_portable(const void* w, const void* a, int64_t n) {
  return dot_blocks_portable(static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a),
                             n / 32, block_q5_0);
}
float vec_dot_q5_1_portable(const void* w, const void* a, int64_t n) {
  return dot_blocks_portable(static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a),
                             n / 32, block_q5_1);
}

// ---- AVX2 dot products, eight blocks per step ----

#if defined(__AVX2__)
__m256i acts32(const int8_t* qs) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

float vec_dot_q4_1_avx2(const void* w, const void* a, int64_t n) {
  const auto isum = [](const BlockQ4_1& x, const BlockQ8_1& y) {
    return dot_u8_s8(unpack_nibbles32(x.qs), acts32(y.qs));
  };
  return dot_blocks32_avx2<true>(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a),
                                 n / 32, isum, block_q4_1);
}

float vec_dot_q5_0_avx2(const void* w, const void* a, int64_t n) {
  // q - 16 as a signed byte: the nibble where the fifth bit is set, nibble - 16 (= nibble with
  // the high bits 0xf0) where it is not.
  const auto isum = [](const BlockQ5_0& x, const BlockQ8_0& y) {
    const __m256i high = _mm256_andnot_si256(bits_to_byte_mask(load_qh(x.qh)),
                                             _mm256_set1_epi8(static_cast<char>(0xf0)));
    return dot_s8_s8(_mm256_or_si256(unpack_nibbles32(x.qs), high), acts32(y.qs));
  };
  return dot_blocks32_avx2<false>(static_cast<const BlockQ5_0*>(w),
                                  static_cast<const BlockQ8_0*>(a), n / 32, isum, block_q5_0);
}

float vec_dot_q5_1_avx2(const void* w, const void* a, int64_t n) {
  const auto isum = [](const BlockQ5_1& x, const BlockQ8_1& y) {
    const __m256i high = _mm256_and_si256(bits_to_byte_mask(load_qh(x.qh)), _mm256_set1_epi8(0x10));
    return dot_u8_s8(_mm256_or_si256(unpack_nibbles32(x.qs), high), acts32(y.qs));
  };
  return dot_blocks32_avx2<true>(static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a),
                                 n / 32, isum, block_q5_1);
}
#endif

constexpr BlockTypeKernels kQ4_1Portable{ActFormat::kQ8_1, dequantize_q4_1, quantize_q4_1,
                                         vec_dot_q4_1_portable, nullptr};
constexpr BlockTypeKernels kQ5_0Portable{ActFormat::kQ8_0, dequantize_q5_0, quantize_q5_0,
                                         vec_dot_q5_0_portable, nullptr};
constexpr BlockTypeKernels kQ5_1Portable{ActFormat::kQ8_1, dequantize_q5_1, quantize_q5_1,
                                         vec_dot_q5_1_portable, nullptr};
#if defined(__AVX2__)
constexpr BlockTypeKernels kQ4_1 = with_vec_dot(kQ4_1Portable, vec_dot_q4_1_avx2);
constexpr BlockTypeKernels kQ5_0 = with_vec_dot(kQ5_0Portable, vec_dot_q5_0_avx2);
constexpr BlockTypeKernels kQ5_1 = with_vec_dot(kQ5_1Portable, vec_dot_q5_1_avx2);
#else
constexpr const BlockTypeKernels& kQ4_1 = kQ4_1Portable;
constexpr const BlockTypeKernels& kQ5_0 = kQ5_0Portable;
constexpr const BlockTypeKernels& kQ5_1 = kQ5_1Portable;
#endif

}  // namespace

const BlockTypeKernels* legacy_block_kernels(DType type) {
  static constexpr BlockKernelsEntry kTable[] = {
      {DType::Q4_1, &kQ4_1}, {DType::Q5_0, &kQ5_0}, {DType::Q5_1, &kQ5_1}};
  return find_block_kernels(kTable, type);
}

const BlockTypeKernels* legacy_block_kernels_portable(DType type) {
  static constexpr BlockKernelsEntry kTable[] = {
      {DType::Q4_1, &kQ4_1Portable}, {DType::Q5_0, &kQ5_0Portable}, {DType::Q5_1, &kQ5_1Portable}};
  return find_block_kernels(kTable, type);
}

}  // namespace k25::K25_KERNEL_SET
