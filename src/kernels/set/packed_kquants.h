// Q4_K and Q6_K matmul on weights repacked at load (layouts in kernels/repack.h), included by
// matmul.cpp inside its namespace after the packed tiles: 256-bit vectors, one half of a group's
// 16 rows (8 rows, a lane each) at a time, on every kernel set that repacks.
//
// Per super-block, half and token, all in exact integers:
// - the dot of each sub-block's unsigned quants with x: AVX-VNNI / AVX-512 VNNI: dpbusd, then a
//   multiply by the sub-block's scale; AVX2: maddubs summed in 16 bits over as many pieces as
//   cannot overflow, then widened by one madd with the scale in both 16-bit halves of its lane;
// - Q4_K: summ = sum of min_s x (sum of x over sub-block s), 4 madds of the byte-pair minimums
//   with the activations' sub-block sums; Q6_K: the quants' offset of 32 as 32 x sum of
//   scale_s x (sum of x over sub-block s), 8 madds of scale pairs with the Q8_K bsums.
// Then acc += (d dx) sumi (Q4_K: acc -= (dmin dx) summ) in float: the same steps for a token in
// every tile size and in decode, so its result does not depend on the other tokens of the call.

// Activations as Q8_K rows (llama.cpp's rounding, as the file-layout kernels take them) plus, for
// Q4_K, per token and super-block the sums of x over sub-blocks 2q and 2q + 1 as two int16.
struct PackedKActs {
  const uint8_t* rows;
  size_t row_bytes;
  const int32_t* min_pairs;  // Q4_K: [(t * n_super + b) * 4 + q]
  int64_t n_super;

  const BlockQ8_K& block(int t, int64_t b) const {
    return reinterpret_cast<const BlockQ8_K*>(rows + t * row_bytes)[b];
  }
};

// The 4 bytes at p in every 32-bit lane.
inline __m256i broadcast4x8(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i load256(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

#if defined(__AVX512VL__)
constexpr int kPackedKTokens = 4;  // 32 vector registers
#else
constexpr int kPackedKTokens = 2;
#endif

// Q4_K: pieces 8j..8j+7 hold sub-block 2j in their low nibbles and 2j + 1 in their high ones.
struct PackedQ4k {
  static constexpr DType kType = DType::Q4_K;
  static constexpr size_t kSuperBytes = kPackedQ4kSuperBytes;

  // acc[t] += the products of half `half` of super-block b (at sb) with tokens [t0, t0 + T).
  template <int T>
  [[gnu::always_inline]] static void super_half(const uint8_t* sb, int half, const PackedKActs& a,
                                                int t0, int64_t b, __m256 acc[T]) {
    const uint8_t* quants = sb + 4 * kHalfRows * half;
    const uint8_t* scales = sb + 2048 + kHalfRows * half;
    const uint8_t* mins = sb + 2048 + 128 + 2 * kHalfRows * half;
    const auto* dw = reinterpret_cast<const uint16_t*>(sb + 2048 + 256) + kHalfRows * half;
    const int8_t* xq[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) xq[t] = a.block(t0 + t, b).qs;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i sumi[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const uint8_t* w = quants + 64 * 8 * j;
      const __m256i sc_lo = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 16 * 2 * j)));
      const __m256i sc_hi = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 16 * (2 * j + 1))));
      __m256i lo_sum[T], hi_sum[T];
      K25_UNROLL
      for (int t = 0; t < T; ++t) lo_sum[t] = hi_sum[t] = _mm256_setzero_si256();
      K25_UNROLL8
      for (int k = 0; k < 8; ++k) {
        const __m256i v = load256(w + 64 * k);
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        K25_UNROLL
        for (int t = 0; t < T; ++t) {
          const int8_t* x = xq[t] + 64 * j + 4 * k;
#if defined(K25_MATMUL_VNNI)
          lo_sum[t] = K25_DPBUSD256(lo_sum[t], lo, broadcast4x8(x));
          hi_sum[t] = K25_DPBUSD256(hi_sum[t], hi, broadcast4x8(x + 32));
#else
          // 8 pieces x 2 products of at most 15 x 127 per 16-bit lane: < 2^15.
          lo_sum[t] = _mm256_add_epi16(lo_sum[t], _mm256_maddubs_epi16(lo, broadcast4x8(x)));
          hi_sum[t] = _mm256_add_epi16(hi_sum[t], _mm256_maddubs_epi16(hi, broadcast4x8(x + 32)));
#endif
        }
      }
#if defined(K25_MATMUL_VNNI)
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_mullo_epi32(lo_sum[t], sc_lo),
                                                             _mm256_mullo_epi32(hi_sum[t], sc_hi)));
      }
#else
      const __m256i sc16_lo = _mm256_or_si256(sc_lo, _mm256_slli_epi32(sc_lo, 16));
      const __m256i sc16_hi = _mm256_or_si256(sc_hi, _mm256_slli_epi32(sc_hi, 16));
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        sumi[t] =
            _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(lo_sum[t], sc16_lo),
                                                       _mm256_madd_epi16(hi_sum[t], sc16_hi)));
      }
#endif
    }
    __m256i summ[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) summ[t] = _mm256_setzero_si256();
    K25_UNROLL
    for (int q = 0; q < 4; ++q) {
      const __m256i pair =
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mins + 32 * q)));
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const int32_t x_sums = a.min_pairs[((t0 + t) * a.n_super + b) * 4 + q];
        summ[t] = _mm256_add_epi32(summ[t], _mm256_madd_epi16(pair, _mm256_set1_epi32(x_sums)));
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dw)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dw + kGroupRows)));
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(a.block(t0 + t, b).d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_mul_ps(d, dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[t]), _mm256_mul_ps(dmin, dx), acc[t]);
    }
  }
};

// Q6_K: element 128n + 32e + l (e < 4, l < 32) is a low nibble of ql byte 64n + l (e = 0, 2: low
// and high nibble) or 64n + 32 + l (e = 1, 3), with bits 2e, 2e + 1 of qh byte 32n + l on top;
// sub-block s (of 16) = 8n + 2e + l / 16. Pieces hold bytes 4k..4k+3, so ql piece 16n + k (and
// 16n + 8 + k) and qh piece 8n + k give elements 4k..4k+3 of the four groups e.
struct PackedQ6k {
  static constexpr DType kType = DType::Q6_K;
  static constexpr size_t kSuperBytes = kPackedQ6kSuperBytes;

  // The 6-bit quants (0..63) of group e from ql pieces a (e = 0, 2) or b (e = 1, 3) and qh piece h.
  static __m256i quants(int e, __m256i a, __m256i b, __m256i h) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i top2 = _mm256_set1_epi8(0x30);
    switch (e) {
      case 0:
        return _mm256_or_si256(_mm256_and_si256(a, low4),
                               _mm256_and_si256(_mm256_slli_epi16(h, 4), top2));
      case 1:
        return _mm256_or_si256(_mm256_and_si256(b, low4),
                               _mm256_and_si256(_mm256_slli_epi16(h, 2), top2));
      case 2:
        return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                               _mm256_and_si256(h, top2));
      default:
        return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(h, 2), top2));
    }
  }

  template <int T>
  [[gnu::always_inline]] static void super_half(const uint8_t* sb, int half, const PackedKActs& a,
                                                int t0, int64_t b, __m256 acc[T]) {
    const uint8_t* ql = sb + 4 * kHalfRows * half;
    const uint8_t* qh = sb + 2048 + 4 * kHalfRows * half;
    const uint8_t* scale_pairs = sb + 3072 + 2 * kHalfRows * half;
    const float* dw = reinterpret_cast<const float*>(sb + 3072 + 256) + kHalfRows * half;
    const BlockQ8_K* x[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) x[t] = &a.block(t0 + t, b);
    __m256i sumi[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      for (int e = 0; e < 4; ++e) {
        // Sub-blocks 8n + 2e and 8n + 2e + 1: the int16 lanes of their row's scale pair.
        const __m256i pairs = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(scale_pairs + 32 * (4 * n + e))));
        K25_UNROLL
        for (int m = 0; m < 2; ++m) {
#if defined(K25_MATMUL_VNNI)
          const __m256i scale = m == 0 ? _mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 16)
                                       : _mm256_srai_epi32(pairs, 16);
          __m256i dot[T];
#else
          // The scale in both 16-bit halves of the lane.
          const __m256i scale = m == 0
                                    ? _mm256_blend_epi16(pairs, _mm256_slli_epi32(pairs, 16), 0xAA)
                                    : _mm256_blend_epi16(_mm256_srli_epi32(pairs, 16), pairs, 0xAA);
          __m256i dot16[T][2];
#endif
          K25_UNROLL
          for (int t = 0; t < T; ++t) {
#if defined(K25_MATMUL_VNNI)
            dot[t] = _mm256_setzero_si256();
#else
            dot16[t][0] = dot16[t][1] = _mm256_setzero_si256();
#endif
          }
          K25_UNROLL
          for (int i = 0; i < 4; ++i) {
            const int k = 4 * m + i;
            const __m256i q =
                quants(e, load256(ql + 64 * (16 * n + k)), load256(ql + 64 * (16 * n + 8 + k)),
                       load256(qh + 64 * (8 * n + k)));
            K25_UNROLL
            for (int t = 0; t < T; ++t) {
              const __m256i xv = broadcast4x8(x[t]->qs + 128 * n + 32 * e + 4 * k);
#if defined(K25_MATMUL_VNNI)
              dot[t] = K25_DPBUSD256(dot[t], q, xv);
#else
              // 2 pieces x 2 products of at most 63 x 127 per 16-bit lane: < 2^15.
              dot16[t][i / 2] = _mm256_add_epi16(dot16[t][i / 2], _mm256_maddubs_epi16(q, xv));
#endif
            }
          }
          K25_UNROLL
          for (int t = 0; t < T; ++t) {
#if defined(K25_MATMUL_VNNI)
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(dot[t], scale));
#else
            sumi[t] =
                _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(dot16[t][0], scale),
                                                           _mm256_madd_epi16(dot16[t][1], scale)));
#endif
          }
        }
      }
    }
    // The quants' offset: 32 x sum over the 16 sub-blocks of scale x (sum of x over it).
    K25_UNROLL
    for (int q = 0; q < 8; ++q) {
      const __m256i pairs = _mm256_cvtepi8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scale_pairs + 32 * q)));
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m256i offset = _mm256_madd_epi16(pairs, broadcast4x8(x[t]->bsums + 2 * q));
        sumi[t] = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(offset, 5));
      }
    }
    const __m256 d = _mm256_loadu_ps(dw);
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]),
                               _mm256_mul_ps(d, _mm256_set1_ps(x[t]->d)), acc[t]);
    }
  }
};

// y for the 16 rows of a group (the first valid_rows of them) and tokens [t0, t0 + T), one half
// at a time; the group (2-3 KB per super-block) stays in L1/L2 while the tokens pass.
template <typename Kind, int T>
void packed_k_tile(const uint8_t* group, const PackedKActs& a, int t0, float* y, int64_t y_stride,
                   int valid_rows) {
  for (int half = 0; half < 2; ++half) {
    if (valid_rows <= kHalfRows * half) break;
    __m256 acc[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.n_super; ++b) {
      Kind::template super_half<T>(group + b * Kind::kSuperBytes, half, a, t0, b, acc);
    }
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      store_rows(y + (t0 + t) * y_stride + kHalfRows * half, acc[t], valid_rows - kHalfRows * half);
    }
  }
}

// Decode (one token): both halves of each super-block in one pass, so the group is read once as
// one sequential stream, prefetched into L2 kPrefetchBytes ahead.
template <typename Kind>
void packed_k_tile_decode(const uint8_t* group, const PackedKActs& a, int t0, float* y,
                          int64_t y_stride, int valid_rows) {
  __m256 acc0[1] = {_mm256_setzero_ps()};
  __m256 acc1[1] = {_mm256_setzero_ps()};
  for (int64_t b = 0; b < a.n_super; ++b) {
    const uint8_t* sb = group + b * Kind::kSuperBytes;
    for (size_t i = 0; i < Kind::kSuperBytes; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(sb + kPrefetchBytes + i), _MM_HINT_T1);
    }
    Kind::template super_half<1>(sb, 0, a, t0, b, acc0);
    Kind::template super_half<1>(sb, 1, a, t0, b, acc1);
  }
  store_rows(y + t0 * y_stride, acc0[0], valid_rows);
  store_rows(y + t0 * y_stride + kHalfRows, acc1[0], valid_rows - kHalfRows);
}

using PackedKTileFn = void (*)(const uint8_t*, const PackedKActs&, int, float*, int64_t, int);
template <typename Kind>
constexpr std::array<PackedKTileFn, kPackedKTokens> packed_k_tiles() {
#if defined(__AVX512VL__)
  return {&packed_k_tile_decode<Kind>, &packed_k_tile<Kind, 2>, &packed_k_tile<Kind, 3>,
          &packed_k_tile<Kind, 4>};
#else
  return {&packed_k_tile_decode<Kind>, &packed_k_tile<Kind, 2>};
#endif
}
