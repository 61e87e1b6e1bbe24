// Internal to src/kernels: the GGUF K-quant super-block layouts (256 weights each), the scale
// unpacking they share, and each type's kernels (quant_q*_k.cpp; the table is quant_kquants.cpp).
//
// Every vec_dot computes, per super-block, the exact integer sum of the products of the weight
// quants with the Q8_K quants, each sub-block's sum times its integer scale (the per-sub-block
// minimum or offset comes from the activation's bsums), and adds it to a float accumulator with
// one fma by d_w * d_x (a second one for the minimums). The integer sums are exact in any order,
// so the scalar, AVX2 and tile forms give bitwise the same result.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/block_types.h"
#include "kernels/set/kernel_set_namespace.h"

namespace k25::K25_KERNEL_SET {

constexpr int kQK = 256;  // weights per super-block

// value = d * (scale & 0xF) * q - dmin * (scale >> 4), q in 0..3; 16 sub-blocks of 16.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];  // element 128 n + 32 j + l: bits 2j..2j+1 of qs[32 n + l]
  uint16_t d;      // f16
  uint16_t dmin;   // f16
};
// value = d * (scale - 32) * (q - 4), q = 2 low bits | high bit << 2; 16 sub-blocks of 16.
struct BlockQ3_K {
  uint8_t hmask[32];   // element 32 k + l: bit k of hmask[l]
  uint8_t qs[64];      // low bits, arranged as in Q2_K
  uint8_t scales[12];  // 16 x 6 bits
  uint16_t d;
};
// value = d * scale * q - dmin * min, q in 0..15; 8 sub-blocks of 32 with 6-bit scale and min.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];  // element 64 j + l: low nibble of qs[32 j + l]; 64 j + 32 + l: high nibble
};
// As Q4_K with a fifth bit: element 64 j + l has bit 2j of qh[l], 64 j + 32 + l bit 2j + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// value = d * scale * (q - 32), q in 0..63; 16 sub-blocks of 16 with int8 scales. Element
// 128 n + 32 k + l: low 4 bits from ql[64 n + 32 (k & 1) + l] (k < 2: low nibble, else high),
// high 2 bits from bits 2k..2k+1 of qh[32 n + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 8 six-bit scales and 8 six-bit minimums of Q4_K / Q5_K.
// Inline: the portable K-quant dots unpack every block's scales for every token.
inline void unpack_scales_mins_k4(const uint8_t* p, uint8_t* scales, uint8_t* mins) {
  // Scales and minimums 0..3 are the low 6 bits of bytes 0..3 and 4..7; 4..7 keep their low 4
  // bits in the nibbles of bytes 8..11 and their high 2 bits in the top bits of bytes 0..7.
  for (int j = 0; j < 4; ++j) {
    scales[j] = p[j] & 63;
    mins[j] = p[j + 4] & 63;
    scales[j + 4] = static_cast<uint8_t>((p[j + 8] & 0xF) | ((p[j] >> 6) << 4));
    mins[j + 4] = static_cast<uint8_t>((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
  }
}
void pack_scales_mins_k4(const uint8_t* scales, const uint8_t* mins, uint8_t* packed);
// The 16 six-bit scales of Q3_K, minus 32.
void unpack_scales_q3_k(const uint8_t* packed, int8_t* scales);

// One weight row against nt <= 4 activation rows (out[t]); what dot_tile runs for each row.
using KqRowDot = void (*)(const uint8_t* w_row, const BlockQ8_K* const* x, int nt, int64_t nb,
                          float* out);
// A row kernel's cases: calls rows(std::integral_constant<int, NT>) with NT = nt (1..4).
template <typename Rows>
[[gnu::always_inline]] inline void kq_dispatch_nt(int nt, Rows rows) {
  switch (nt) {
    case 1:
      return rows(std::integral_constant<int, 1>{});
    case 2:
      return rows(std::integral_constant<int, 2>{});
    case 3:
      return rows(std::integral_constant<int, 3>{});
    default:
      return rows(std::integral_constant<int, 4>{});
  }
}
// The portable row kernel: the scalar vec_dot once per token.
inline void kq_scalar_rows(float (*vec_dot)(const void*, const void*, int64_t),
                           const uint8_t* w_row, const BlockQ8_K* const* x, int nt, int64_t nb,
                           float* out) {
  for (int t = 0; t < nt; ++t) out[t] = vec_dot(w_row, x[t], nb * kQK);
}
// BlockTypeKernels::vec_dot over a row kernel (one token).
inline float kq_vec_dot(KqRowDot row_dot, const void* w, const void* x, int64_t n) {
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float out;
  row_dot(static_cast<const uint8_t*>(w), &xb, 1, n / kQK, &out);
  return out;
}
// BlockTypeKernels::dot_tile over a row kernel.
void kq_dot_tile(KqRowDot row_dot, const uint8_t* w, size_t w_row_bytes, int nr,
                 const uint8_t* acts, size_t act_row_bytes, int nt, int64_t n, float* y,
                 int64_t y_stride);

// Fits x[0..n) ~ scale * q with integer q in [-nmax, nmax - 1], minimising the error weighted by
// x^2 over a few candidate scales; writes q + nmax to L and returns the scale.
float kq_fit_symmetric(const float* x, int n, int nmax, uint8_t* L);
// Fits x[0..n) ~ scale * q - min with q in [0, nmax] and min >= 0, minimising the error weighted by
// w; writes q to L, the minimum to *min and returns the scale.
float kq_fit_affine(const float* x, const float* w, int n, int nmax, uint8_t* L, float* min);
// Q4_K / Q5_K: fits 8 sub-blocks of 32 to q in [0, nmax] with a scale and a minimum each, both
// quantised to 6 bits against the super-block's d and dmin (f16); writes the quants to L.
void kq_quantize_affine_k4(const float* x, int nmax, uint8_t* L, uint16_t* d, uint16_t* dmin,
                           uint8_t* packed_scales);

// The float step of every K-quant dot: acc + d * sumi, rounded once.
inline float kq_accumulate(float acc, float d, int32_t sumi) {
  return std::fma(d, static_cast<float>(sumi), acc);
}

// Round to nearest, ties to even (llama.cpp's nearest_int).
inline int kq_nearest(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// Each type's kernels. *_scalar is the portable vec_dot; the unsuffixed one uses AVX2 where the
// build has it (the same function otherwise).
#define K25_KQUANT_KERNELS(t)                                                          \
  void dequantize_##t(const void* src, float* dst, int64_t n);                         \
  float vec_dot_##t##_scalar(const void* w, const void* x, int64_t n);                 \
  float vec_dot_##t(const void* w, const void* x, int64_t n);                          \
  void dot_tile_##t(const uint8_t* w, size_t w_row_bytes, int nr, const uint8_t* acts, \
                    size_t act_row_bytes, int nt, int64_t n, float* y, int64_t y_stride);
K25_KQUANT_KERNELS(q2_k)
K25_KQUANT_KERNELS(q3_k)
K25_KQUANT_KERNELS(q4_k)
K25_KQUANT_KERNELS(q5_k)
K25_KQUANT_KERNELS(q6_k)
#undef K25_KQUANT_KERNELS

// In a type's file: its row kernel and the vec_dot_<t> / dot_tile_<t> entries over it. The row
// kernel runs rows_nt(w, x, nb, out) with NT = nt under AVX2 (rows_nt names a function for NT,
// in parentheses), vec_dot_<t>_scalar for each token otherwise.
#if defined(__AVX2__)
#define K25_KQUANT_ROW_DOT(t, Block, rows_nt)                                                     \
  void t##_row_dot(const uint8_t* w_row, const BlockQ8_K* const* x, int nt, int64_t nb,           \
                   float* out) {                                                                  \
    const auto* w = reinterpret_cast<const Block*>(w_row);                                        \
    kq_dispatch_nt(nt, [&]<int NT>(std::integral_constant<int, NT>) { rows_nt(w, x, nb, out); }); \
  }
#else
#define K25_KQUANT_ROW_DOT(t, Block, rows_nt)                                           \
  void t##_row_dot(const uint8_t* w_row, const BlockQ8_K* const* x, int nt, int64_t nb, \
                   float* out) {                                                        \
    kq_scalar_rows(&vec_dot_##t##_scalar, w_row, x, nt, nb, out);                       \
  }
#endif
#define K25_KQUANT_ROW_KERNELS(t, Block, rows_nt)                                           \
  namespace {                                                                               \
  K25_KQUANT_ROW_DOT(t, Block, rows_nt)                                                     \
  }                                                                                         \
  float vec_dot_##t(const void* w, const void* x, int64_t n) {                              \
    return kq_vec_dot(&t##_row_dot, w, x, n);                                               \
  }                                                                                         \
  void dot_tile_##t(const uint8_t* w, size_t w_row_bytes, int nr, const uint8_t* acts,      \
                    size_t act_row_bytes, int nt, int64_t n, float* y, int64_t y_stride) {  \
    kq_dot_tile(&t##_row_dot, w, w_row_bytes, nr, acts, act_row_bytes, nt, n, y, y_stride); \
  }

void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);

}  // namespace k25::K25_KERNEL_SET
