// Q4_K matmul on weights repacked at load (layout in kernels/repack.h), included by matmul.cpp
// inside its namespace after the packed tiles: 256-bit vectors, one half of a group's 16 rows
// (8 rows, a lane each) at a time, on every kernel set that repacks.
//
// Per super-block, half and token, all in exact integers:
// - the dot of each sub-block of 32 quants with x: AVX-VNNI / AVX-512 VNNI: dpbusd of the nibbles
//   (0..15) with x; AVX2: maddubs summed in 16 bits over the sub-block (8 pieces x 2 products of
//   at most 15 * 127 per lane, < 2^15), then widened by one madd with the scale;
// - sumi = sum over the 8 sub-blocks of scale x dot (at most 8 x 63 x 60960 < 2^31);
// - summ = sum of min_s x (sum of x over sub-block s): 4 madds of the byte-pair minimums with the
//   activations' 16-bit sub-block sums.
// Then acc += (d dx) sumi and acc -= (dmin dx) summ in float: the same steps for a token in every
// tile size and in decode, so its result does not depend on the other tokens of the call.

// Activations as Q8_K rows (llama.cpp's rounding, as the file-layout kernels take them) plus, per
// token and super-block, the sums of x over sub-blocks 2q and 2q + 1 packed as two int16 (q < 4).
struct Q4kActs {
  const uint8_t* rows;
  size_t row_bytes;
  const int32_t* min_pairs;  // [(t * n_super + b) * 4 + q]
  int64_t n_super;

  const BlockQ8_K& block(int t, int64_t b) const {
    return reinterpret_cast<const BlockQ8_K*>(rows + t * row_bytes)[b];
  }
};

// The 4 quants of x at p in every 32-bit lane.
inline __m256i q4k_broadcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

#if defined(__AVX512VL__)
constexpr int kQ4kTokens = 4;  // 32 vector registers
#else
constexpr int kQ4kTokens = 2;
#endif

// acc[t] += the products of half `half` of super-block b (at sb) with tokens [t0, t0 + T).
template <int T>
[[gnu::always_inline]] inline void q4k_super_half(const uint8_t* sb, int half, const Q4kActs& a,
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
    // Pieces 8j..8j+7: low nibbles are sub-block 2j, high nibbles 2j + 1.
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
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 64 * k));
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const int8_t* x = xq[t] + 64 * j + 4 * k;
#if defined(K25_MATMUL_VNNI)
        lo_sum[t] = K25_DPBUSD256(lo_sum[t], lo, q4k_broadcast(x));
        hi_sum[t] = K25_DPBUSD256(hi_sum[t], hi, q4k_broadcast(x + 32));
#else
        lo_sum[t] = _mm256_add_epi16(lo_sum[t], _mm256_maddubs_epi16(lo, q4k_broadcast(x)));
        hi_sum[t] = _mm256_add_epi16(hi_sum[t], _mm256_maddubs_epi16(hi, q4k_broadcast(x + 32)));
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
    // The scale in both 16-bit halves of its row's lane: one madd widens and scales.
    const __m256i sc16_lo = _mm256_or_si256(sc_lo, _mm256_slli_epi32(sc_lo, 16));
    const __m256i sc16_hi = _mm256_or_si256(sc_hi, _mm256_slli_epi32(sc_hi, 16));
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(lo_sum[t], sc16_lo),
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

// y for the 16 rows of a group (the first valid_rows of them) and tokens [t0, t0 + T), one half
// at a time; the group (about 2.3 KB per super-block) stays in L1/L2 while the tokens pass.
template <int T>
void q4k_tile(const uint8_t* group, const Q4kActs& a, int t0, float* y, int64_t y_stride,
              int valid_rows) {
  for (int half = 0; half < 2; ++half) {
    if (valid_rows <= kHalfRows * half) break;
    __m256 acc[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.n_super; ++b) {
      q4k_super_half<T>(group + b * kPackedQ4kSuperBytes, half, a, t0, b, acc);
    }
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      store_rows(y + (t0 + t) * y_stride + kHalfRows * half, acc[t], valid_rows - kHalfRows * half);
    }
  }
}

// Decode (one token): both halves of each super-block in one pass, so the group is read once as
// one sequential stream, prefetched into L2 kPrefetchBytes ahead.
void q4k_tile_decode(const uint8_t* group, const Q4kActs& a, int t0, float* y, int64_t y_stride,
                     int valid_rows) {
  __m256 acc0[1] = {_mm256_setzero_ps()};
  __m256 acc1[1] = {_mm256_setzero_ps()};
  for (int64_t b = 0; b < a.n_super; ++b) {
    const uint8_t* sb = group + b * kPackedQ4kSuperBytes;
    for (size_t i = 0; i < kPackedQ4kSuperBytes; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(sb + kPrefetchBytes + i), _MM_HINT_T1);
    }
    q4k_super_half<1>(sb, 0, a, t0, b, acc0);
    q4k_super_half<1>(sb, 1, a, t0, b, acc1);
  }
  store_rows(y + t0 * y_stride, acc0[0], valid_rows);
  store_rows(y + t0 * y_stride + kHalfRows, acc1[0], valid_rows - kHalfRows);
}

using Q4kTileFn = void (*)(const uint8_t*, const Q4kActs&, int, float*, int64_t, int);
constexpr std::array<Q4kTileFn, kQ4kTokens> q4k_tiles() {
#if defined(__AVX512VL__)
  return {&q4k_tile_decode, &q4k_tile<2>, &q4k_tile<3>, &q4k_tile<4>};
#else
  return {&q4k_tile_decode, &q4k_tile<2>};
#endif
}
