// Internal to src/kernels/set: the exact integer dot of one Q8_0 or Q4_0 weight block with one
// block of 32 Q8_0 activation quants, for the sets without AVX2 (the scalar set). SSSE3 (part of
// the scalar set's x86-64-v2 baseline) and NEON (the aarch64 baseline) take 16 quants per
// instruction; the portable loop is the reference. The integer sums are exact on every path, so
// the float a matmul builds from them is the same bit for bit whichever path ran.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/quant.h"
#include "kernels/set/float_sums.h"
#include "kernels/set/kernel_set_namespace.h"
#include "kernels/set/x86_intrinsics.h"

#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace k25::K25_KERNEL_SET {

enum class QKind { kQ8, kQ4 };

template <QKind K>
using QBlock = std::conditional_t<K == QKind::kQ8, BlockQ8_0, BlockQ4_0>;

// A weight block's 32 quants, unpacked once for its dots with several tokens.
#if defined(__SSSE3__)
// SSSE3 multiplies unsigned by signed bytes (maddubs): Q8_0 gives |w| and moves w's signs onto
// the activations; Q4_0 gives its nibbles 0..15 and takes 8 x sum(x) off afterwards.
struct WeightQuants {
  __m128i u[2];     // the unsigned operand, elements 0-15 and 16-31
  __m128i sign[2];  // Q8_0: the quants, whose signs the activations take
};

template <QKind K>
inline WeightQuants weight_quants(const QBlock<K>& w) {
  WeightQuants q;
  if constexpr (K == QKind::kQ8) {
    for (int h = 0; h < 2; ++h) {
      q.sign[h] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * h));
      q.u[h] = _mm_abs_epi8(q.sign[h]);  // -128 becomes 128 as an unsigned byte
    }
  } else {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
    const __m128i low = _mm_set1_epi8(0x0f);
    q.u[0] = _mm_and_si128(packed, low);
    q.u[1] = _mm_and_si128(_mm_srli_epi16(packed, 4), low);
  }
  return q;
}

// The dot with 32 activation quants x (16-byte aligned, each in [-127, 127]) in four int32 lanes
// whose total is the dot (Q4_0: before the 8 x sum(x) is taken off).
template <QKind K>
inline __m128i block_dot_lanes(const WeightQuants& w, const int8_t* x) {
  const __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(x));
  const __m128i x1 = _mm_load_si128(reinterpret_cast<const __m128i*>(x + 16));
  const __m128i ones = _mm_set1_epi16(1);
  if constexpr (K == QKind::kQ8) {
    // A pair of products is at most 2 x 128 x 127 in magnitude: within int16.
    const __m128i p0 = _mm_maddubs_epi16(w.u[0], _mm_sign_epi8(x0, w.sign[0]));
    const __m128i p1 = _mm_maddubs_epi16(w.u[1], _mm_sign_epi8(x1, w.sign[1]));
    return _mm_add_epi32(_mm_madd_epi16(p0, ones), _mm_madd_epi16(p1, ones));
  } else {
    // Nibbles: two pairs add up to at most 4 x 15 x 127 in magnitude.
    return _mm_madd_epi16(
        _mm_add_epi16(_mm_maddubs_epi16(w.u[0], x0), _mm_maddubs_epi16(w.u[1], x1)), ones);
  }
}

// Lane i: the total of the four lanes of v[i].
inline __m128i lane_totals(const __m128i v[4]) {
  const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(v[0], v[1]), _mm_unpackhi_epi32(v[0], v[1]));
  const __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(v[2], v[3]), _mm_unpackhi_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd));
}

// The dot with 32 activation quants x whose sum is x_sum.
template <QKind K>
inline int32_t block_dot_exact(const WeightQuants& w, const int8_t* x, int32_t x_sum) {
  const int32_t dot = hsum_i32(block_dot_lanes<K>(w, x));
  return K == QKind::kQ8 ? dot : dot - 8 * x_sum;
}

// Lane i: the f16 in the low 16 bits of lane i of h (the high bits 0) as a float, the bits
// f16_to_f32_portable gives: the magnitude's bits moved into place and the exponent rebased,
// infinities and NaNs (made quiet) rebased once more, zeros and subnormals given exponent 2^-14
// and then 2^-14 taken off, which is exact.
inline __m128 halves_to_floats(__m128i h) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i magnitude = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x7fff)), 13);
  const __m128i exponent = _mm_and_si128(magnitude, _mm_set1_epi32(0x7c00 << 13));
  const __m128i inf_nan = _mm_cmpeq_epi32(exponent, _mm_set1_epi32(0x7c00 << 13));
  const __m128i nan = _mm_andnot_si128(
      _mm_cmpeq_epi32(_mm_and_si128(magnitude, _mm_set1_epi32(0x3ff << 13)), zero), inf_nan);
  const __m128i tiny = _mm_cmpeq_epi32(exponent, zero);
  __m128i bits = _mm_add_epi32(magnitude, _mm_set1_epi32(112 << 23));
  bits = _mm_add_epi32(bits, _mm_and_si128(inf_nan, _mm_set1_epi32(112 << 23)));
  bits = _mm_or_si128(bits, _mm_and_si128(nan, _mm_set1_epi32(0x400000)));
  bits = _mm_add_epi32(bits, _mm_and_si128(tiny, _mm_set1_epi32(1 << 23)));
  const __m128 value =
      _mm_sub_ps(_mm_castsi128_ps(bits), _mm_and_ps(_mm_castsi128_ps(tiny), _mm_set1_ps(0x1p-14f)));
  return _mm_or_ps(value,
                   _mm_castsi128_ps(_mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16)));
}
#elif defined(__ARM_NEON)
struct WeightQuants {
  int8x16_t q[2];  // the signed quants (Q4_0: nibble - 8), elements 0-15 and 16-31
};

template <QKind K>
inline WeightQuants weight_quants(const QBlock<K>& w) {
  WeightQuants q;
  if constexpr (K == QKind::kQ8) {
    q.q[0] = vld1q_s8(w.qs);
    q.q[1] = vld1q_s8(w.qs + 16);
  } else {
    const uint8x16_t packed = vld1q_u8(w.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    q.q[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f))), eight);
    q.q[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight);
  }
  return q;
}

template <QKind K>
inline int32_t block_dot_exact(const WeightQuants& w, const int8_t* x, int32_t /*x_sum*/) {
  int32x4_t sum = vdupq_n_s32(0);
  for (int h = 0; h < 2; ++h) {
    const int8x16_t xh = vld1q_s8(x + 16 * h);
    // Two products are at most 2 x 128 x 127 in magnitude: within int16.
    int16x8_t p = vmull_s8(vget_low_s8(w.q[h]), vget_low_s8(xh));
    p = vmlal_s8(p, vget_high_s8(w.q[h]), vget_high_s8(xh));
    sum = vpadalq_s16(sum, p);
  }
  return vaddvq_s32(sum);
}
#else
struct WeightQuants {
  int8_t q[32];  // the signed quants (Q4_0: nibble - 8)
};

template <QKind K>
inline WeightQuants weight_quants(const QBlock<K>& w) {
  WeightQuants q;
  for (int j = 0; j < 32; ++j) {
    if constexpr (K == QKind::kQ8) {
      q.q[j] = w.qs[j];
    } else {
      q.q[j] = static_cast<int8_t>((j < 16 ? w.qs[j] & 0x0f : w.qs[j - 16] >> 4) - 8);
    }
  }
  return q;
}

template <QKind K>
inline int32_t block_dot_exact(const WeightQuants& w, const int8_t* x, int32_t /*x_sum*/) {
  int32_t dot = 0;
  for (int j = 0; j < 32; ++j) dot += w.q[j] * x[j];
  return dot;
}
#endif

}  // namespace k25::K25_KERNEL_SET
