// The 256-bit halves of a packed group, included by matmul.cpp inside its namespace after
// PackedGroup: the 16 rows are two halves of 8, the 32 bytes at offset 32h of every 64-byte piece
// holding 4 quants of each row of half h, so one 256-bit vector of quants advances the dots of 8
// rows with one token, and each lane ends up with a whole row's integer dot: one float conversion
// and scale then serve 8 rows. The avx2 and avxvnni sets' tiles (packed_tiles_256.h) and decode
// are built on these; the avx512 set decodes Q8_0 with halves_tile_decode too (see
// packed_tiles_512.h).
//
// The integer step for 4 quants of 8 rows with one token:
// - AVX-VNNI: dpbusd on the stored unsigned quants (Q8_0 offset by +128; the activations' bias
//   removes 128 * sum(x), or 8 * sum(x) for Q4_0).
// - AVX2, Q8_0: the sign trick (|w| unsigned times x with w's sign, maddubs then madd) on the
//   quants stored signed, exact: a pair of products is at most 2 * 128 * 127 < 2^15. On weights
//   repacked at load it is turned round (|x| times w with x's sign, see block_dots), the same
//   products.
// - AVX2, Q4_0: maddubs of the nibbles (0..15) with x, summed in 16 bits over the whole block
//   (16 products of at most 15 * 127 per lane, < 2^15) and widened once per block: half the
//   multiplies of the sign trick.
// Every token takes the same integer and float steps in every tile size and in decode, so a
// token's result does not depend on the rest of the batch.

inline __m256i broadcast4_256(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The quants of one piece of one half, prepared once for every token that uses them.
template <QKind K>
struct HalfPiece;

template <>
struct HalfPiece<QKind::kQ8> {
  __m256i w;  // VNNI: the stored unsigned quants. AVX2: their absolute values.
#if !defined(K25_MATMUL_VNNI)
  __m256i sign;  // AVX2: the signed quants, whose signs move onto x
#endif
  // single_token: the piece serves one token (decode). GCC then folds the load into both abs
  // and sign, two loads per piece, and the load ports became the limit (avx2 Q8_0 decode -5%),
  // so the load is pinned to a register; with several tokens the folded loads were faster
  // (pp512 +1%).
  HalfPiece(const uint8_t* p, [[maybe_unused]] bool single_token) {
    __m256i stored = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
#if defined(K25_MATMUL_VNNI)
    w = stored;
#else
    if (single_token) asm("" : "+x"(stored));
    sign = stored;  // stored as they are on this set (kPackedQ8Flip)
    w = _mm256_abs_epi8(stored);
#endif
  }
  // dot + the products of these quants with x, 4 quants of one token broadcast (per row).
  __m256i step(__m256i dot, __m256i x) const {
#if defined(K25_MATMUL_VNNI)
    return K25_DPBUSD256(dot, w, x);
#else
    const __m256i pairs = _mm256_maddubs_epi16(w, _mm256_sign_epi8(x, sign));
    return _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
  }
};

// Q4_0: a piece's low nibbles are quants 4k..4k+3 of the block, its high nibbles 16+4k..16+4k+3.
template <>
struct HalfPiece<QKind::kQ4> {
  __m256i lo, hi;
  HalfPiece(const uint8_t* p, bool /*single_token*/) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    lo = _mm256_and_si256(v, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
  // A block's dot is accumulated from start(bias), advanced by step for each piece and read by
  // finish. x_lo, x_hi: x's quants 4k..4k+3 and 16+4k..16+4k+3 of the block, broadcast.
#if defined(K25_MATMUL_VNNI)
  static __m256i start(int32_t bias) {
    return _mm256_set1_epi32(bias);
  }
  __m256i step(__m256i dot, __m256i x_lo, __m256i x_hi) const {
    return K25_DPBUSD256(K25_DPBUSD256(dot, lo, x_lo), hi, x_hi);
  }
  static __m256i finish(__m256i dot, int32_t /*bias*/) {
    return dot;
  }
#else
  // 16-bit partial sums over the block (see the top of this file), widened and biased once.
  static __m256i start(int32_t /*bias*/) {
    return _mm256_setzero_si256();
  }
  __m256i step(__m256i sum16, __m256i x_lo, __m256i x_hi) const {
    const __m256i a = _mm256_maddubs_epi16(lo, x_lo);
    const __m256i b = _mm256_maddubs_epi16(hi, x_hi);
    return _mm256_add_epi16(sum16, _mm256_add_epi16(a, b));
  }
  static __m256i finish(__m256i sum16, int32_t bias) {
    return _mm256_add_epi32(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1)),
                            _mm256_set1_epi32(bias));
  }
#endif
};

// The pieces at w of halves [0, H) (half h's quants are 4 * kHalfRows bytes after half h - 1's)
// for T tokens.
template <QKind K, int H, int T>
inline std::array<HalfPiece<K>, H> pieces_at(const uint8_t* w) {
  if constexpr (H == 1) {
    return {HalfPiece<K>(w, T == 1)};
  } else {
    return {HalfPiece<K>(w, T == 1), HalfPiece<K>(w + kHalfRows * 4, T == 1)};
  }
}

// The integer dots (plus each token's bias) of block b of halves [0, H) with tokens [0, T) of xq:
// each broadcast of x feeds every half (a broadcast costs a vector-pipe slot like the multiply
// it feeds, see packed_tiles_512.h). xa: |x|, same layout, read when kSymmetricQ8.
//
// kSymmetricQ8 (avx2 set, Q8_0 groups whose quants are in [-127, 127], see kernels/repack.h):
// the sign trick the other way round, |x| times w with x's sign. |x| comes with the activations
// (QuantizedActs::q_abs, a broadcast load like x's), so a token and half cost sign, maddubs, madd
// and add, and no abs(w) per piece: decode 8 vector operations per 4 quants of x instead of 10,
// prefill 24 per piece of 3 tokens instead of 26 (see docs/benchmarks.md, sessions 30-31). The
// products and their pairwise sums are those of the other order, so the dots are the same
// integers.
template <QKind K, int T, int H, bool kSymmetricQ8>
inline void block_dots(const uint8_t* w, const int8_t* xb, const int8_t* xa, int64_t x_stride,
                       const int32_t* bias, __m256i (&dot)[H][T]) {
  static_assert(!kSymmetricQ8 || (K == QKind::kQ8 && kPackedQ8NeedsSymmetric));
  if constexpr (K == QKind::kQ8) {
    K25_UNROLL
    for (int h = 0; h < H; ++h) {
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
#if defined(K25_MATMUL_VNNI)
        dot[h][t] = _mm256_set1_epi32(bias[t]);
#else
        // The sign trick has no bias (packed_bias_multiplier): a zero start, which the compiler
        // folds into the first step, instead of a broadcast per block and token.
        dot[h][t] = _mm256_setzero_si256();
#endif
      }
    }
    K25_UNROLL8
    for (int k = 0; k < 8; ++k) {
      if constexpr (kSymmetricQ8) {
        __m256i q[H];
        K25_UNROLL
        for (int h = 0; h < H; ++h) {
          q[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 64 * k + 32 * h));
        }
        K25_UNROLL
        for (int t = 0; t < T; ++t) {
          const __m256i x = broadcast4_256(xb + t * x_stride + 4 * k);
          const __m256i x_abs = broadcast4_256(xa + t * x_stride + 4 * k);
          K25_UNROLL
          for (int h = 0; h < H; ++h) {
            const __m256i pairs = _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(q[h], x));
            dot[h][t] = _mm256_add_epi32(dot[h][t], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
            keep_as_chain(dot[h][t]);
          }
        }
      } else {
        const auto piece = pieces_at<K, H, T>(w + 64 * k);
        K25_UNROLL
        for (int t = 0; t < T; ++t) {
          const __m256i x = broadcast4_256(xb + t * x_stride + 4 * k);
          K25_UNROLL
          for (int h = 0; h < H; ++h) {
            dot[h][t] = piece[h].step(dot[h][t], x);
            keep_as_chain(dot[h][t]);
          }
        }
      }
    }
  } else {
    K25_UNROLL
    for (int h = 0; h < H; ++h) {
      K25_UNROLL
      for (int t = 0; t < T; ++t) dot[h][t] = HalfPiece<K>::start(bias[t]);
    }
    K25_UNROLL
    for (int k = 0; k < 4; ++k) {
      const auto piece = pieces_at<K, H, T>(w + 64 * k);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m256i x_lo = broadcast4_256(xb + t * x_stride + 4 * k);
        const __m256i x_hi = broadcast4_256(xb + t * x_stride + 16 + 4 * k);
        K25_UNROLL
        for (int h = 0; h < H; ++h) {
          dot[h][t] = piece[h].step(dot[h][t], x_lo, x_hi);
          keep_as_chain(dot[h][t]);
        }
      }
    }
    K25_UNROLL
    for (int h = 0; h < H; ++h) {
      K25_UNROLL
      for (int t = 0; t < T; ++t) dot[h][t] = HalfPiece<K>::finish(dot[h][t], bias[t]);
    }
  }
}

// d_w of the 8 rows of one half, from a block's 16 row scales.
inline __m256 half_block_dw(const uint16_t* scales, int half) {
  return _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + kHalfRows * half)));
}

// Decode (one token): both halves in one pass over the group, so the group is read once as one
// sequential stream, with a software prefetch kPrefetchBytes ahead (kDecodePrefetchHint); the float
// steps of each row are those of packed_tile. The loop walks the group unit by unit with running
// pointers: recomputing each block's place from its index cost a fifth of the instructions.
// kSymmetricQ8: the group's Q8_0 quants are in [-127, 127] (kernels/repack.h's flags).
template <QKind K, bool kSymmetricQ8>
void halves_tile_decode(const PackedGroup& p, const QuantizedActs& a, int t0, float* y,
                        int64_t y_stride, int valid_rows) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  const int8_t* xb = a.q + t0 * a.cols;
  const int8_t* xb_abs = kSymmetricQ8 ? a.q_abs + t0 * a.cols : nullptr;
  const int32_t* bias = a.bias + t0;
  const float* dx = a.d + t0;
  // Block i of the unit at `unit`.
  const auto add_block = [&](const uint8_t* unit, int i) {
    const auto* scales = reinterpret_cast<const uint16_t*>(unit + kUnits<K>.scales_in_unit(i));
    __m256i dot[2][1];
    block_dots<K, 1, 2, kSymmetricQ8>(unit + kUnits<K>.quants_in_unit(i), xb, xb_abs, a.cols, bias,
                                      dot);
    const __m256 x_scale = _mm256_set1_ps(*dx);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[0][0]),
                           _mm256_mul_ps(half_block_dw(scales, 0), x_scale), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[1][0]),
                           _mm256_mul_ps(half_block_dw(scales, 1), x_scale), acc1);
    xb += 32;
    if constexpr (kSymmetricQ8) xb_abs += 32;
    bias += a.n_tokens;
    dx += a.n_tokens;
  };
  const uint8_t* unit = p.base;
  int64_t b = 0;
  for (; b + kPackedUnitBlocks <= a.n_blocks;
       b += kPackedUnitBlocks, unit += kUnits<K>.unit_bytes()) {
    prefetch_ahead(unit, kUnits<K>.unit_bytes());
    K25_UNROLL
    for (int i = 0; i < kPackedUnitBlocks; ++i) add_block(unit, i);
  }
  for (int i = 0; b < a.n_blocks; ++b, ++i) add_block(unit, i);  // a last unit short of blocks
  store_rows(y + t0 * y_stride, acc0, valid_rows);
  store_rows(y + t0 * y_stride + kHalfRows, acc1, valid_rows - kHalfRows);
}
