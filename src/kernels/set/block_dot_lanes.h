// Internal to src/kernels: how the block-type dot products (block_types.h) add up their blocks,
// so that the AVX2 and the portable kernels of a type give bitwise the same float.
//
// A block's integer dot product is exact in both paths. Its float contribution goes to lane
// b % 8 (b = block index in the row) with fused multiply-adds, and the eight lanes are summed
// in one fixed order at the end: the AVX2 kernels keep the lanes in one __m256 and process
// eight blocks per step, the portable kernels keep them in an array.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/set/kernel_set_namespace.h"

namespace k25::K25_KERNEL_SET {

constexpr int kDotLanes = 8;

// acc[lane of block] += a * b, rounded once (std::fma and _mm256_fmadd_ps round the same).
inline void lane_fma(float* acc, int64_t block, float a, float b) {
  float& lane = acc[block % kDotLanes];
  lane = std::fma(a, b, lane);
}

// The pairwise order of an AVX2 horizontal sum (high half onto low half, then within).
inline float sum_lanes(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

#if defined(__AVX2__)
// Eight vectors of int32 partial sums (one per block) to one vector of the eight block totals,
// lane i = total of p[i].
inline __m256i sum_blocks8(const __m256i* p) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  // a holds blocks 0..3 in its low 128 bits (first halves) and high 128 bits (second halves).
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// The f16 values at base, base + stride, ..., base + 7 stride, as eight floats (inserted one by
// one: building them in memory and loading the vector would stall on store forwarding).
inline __m256 load_halves8(const uint8_t* base, size_t stride) {
  const auto half_at = [&](int i) {
    uint16_t h;
    std::memcpy(&h, base + i * stride, 2);
    return static_cast<int>(h);
  };
  __m128i v = _mm_cvtsi32_si128(half_at(0));
  v = _mm_insert_epi16(v, half_at(1), 1);
  v = _mm_insert_epi16(v, half_at(2), 2);
  v = _mm_insert_epi16(v, half_at(3), 3);
  v = _mm_insert_epi16(v, half_at(4), 4);
  v = _mm_insert_epi16(v, half_at(5), 5);
  v = _mm_insert_epi16(v, half_at(6), 6);
  v = _mm_insert_epi16(v, half_at(7), 7);
  return _mm256_cvtph_ps(v);
}

// 16 bytes of packed nibbles to 32 bytes: the low nibbles (elements 0..15) in the low 128
// bits, the high nibbles (elements 16..31) in the high 128 bits.
inline __m256i unpack_nibbles32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

// 0xff in byte j where bit j of `bits` is set, else 0.
inline __m256i bits_to_byte_mask(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select);
}

// Products of unsigned bytes u with signed bytes s, summed in eight int32 lanes; u <= 128 and
// |s| <= 127 keep maddubs' pair sums within int16 (no saturation).
inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The same for two signed operands (w in -127..127): |w| times s with w's sign.
inline __m256i dot_s8_s8(__m256i w, __m256i s) {
  return dot_u8_s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(s, w));
}
#endif

// The portable dot of nb blocks: block(w[b], a[b], b, lanes) adds block b to its lane.
template <class W, class A, class Block>
float dot_blocks_portable(const W* w, const A* a, int64_t nb, Block block) {
  float lanes[kDotLanes] = {};
  for (int64_t b = 0; b < nb; ++b) block(w[b], a[b], b, lanes);
  return sum_lanes(lanes);
}

#if defined(__AVX2__)
// The AVX2 dot of nb blocks of 32 whose weight and activation blocks both start with an f16
// scale d: eight blocks per step, isum(w, a) giving one block's int32 partial sums, each
// lane += d_w d_a isum; with kMin, then += m_w s_a from the f16 pair at byte 2 of both blocks
// (Q4_1, Q5_1 against Q8_1). The last nb % 8 blocks go through the portable block().
template <bool kMin, class W, class A, class Isum, class Block>
float dot_blocks32_avx2(const W* w, const A* a, int64_t nb, Isum isum, Block block) {
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kDotLanes <= nb; b += kDotLanes) {
    __m256i p[kDotLanes];
    for (int i = 0; i < kDotLanes; ++i) p[i] = isum(w[b + i], a[b + i]);
    const auto* wb = reinterpret_cast<const uint8_t*>(w + b);
    const auto* ab = reinterpret_cast<const uint8_t*>(a + b);
    const __m256 d = _mm256_mul_ps(load_halves8(wb, sizeof(W)), load_halves8(ab, sizeof(A)));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum_blocks8(p)), acc);
    if constexpr (kMin) {
      acc = _mm256_fmadd_ps(load_halves8(wb + 2, sizeof(W)), load_halves8(ab + 2, sizeof(A)), acc);
    }
  }
  float lanes[kDotLanes];
  _mm256_storeu_ps(lanes, acc);
  for (; b < nb; ++b) block(w[b], a[b], b, lanes);
  return sum_lanes(lanes);
}
#endif

}  // namespace k25::K25_KERNEL_SET
