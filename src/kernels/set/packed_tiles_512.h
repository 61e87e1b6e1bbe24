// The 512-bit packed matmul tiles (the avx512 set), included by matmul.cpp inside its namespace
// after PackedGroup: one 512-bit dpbusd advances the dots of a group's 16 rows with one token
// (but Q8_0 decode takes 256-bit halves, see packed_tiles).
// GCC 12's AVX-512 conversion intrinsics pass _mm512_undefined_ps() as the unused merge source,
// which -Wmaybe-uninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

constexpr int kPackTokens = 8;

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// y for the 16 rows of a packed group (the first valid_rows of them) and tokens [t0, t0 + T).
// The activations' bias holds the full correction for the unsigned weight offset.
template <QKind K, int T>
void packed_tile(const PackedGroup& p, const QuantizedActs& a, int t0, float* y, int64_t y_stride,
                 int valid_rows) {
  const int8_t* xq = a.q + t0 * a.cols;
  __m512 acc[T];
  K25_UNROLL8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const int32_t* bias = a.bias + b * a.n_tokens + t0;
    const int8_t* xb = xq + 32 * b;
    __m512i dot[T];
    K25_UNROLL8
    for (int t = 0; t < T; ++t) dot[t] = _mm512_set1_epi32(bias[t]);
    if constexpr (K == QKind::kQ8) {
      const uint8_t* w = p.quants<K>(b);
      K25_UNROLL8
      for (int k = 0; k < 8; ++k) {
        const __m512i wv = _mm512_load_si512(w + 64 * k);
        K25_UNROLL8
        for (int t = 0; t < T; ++t) {
          dot[t] = _mm512_dpbusd_epi32(dot[t], wv, broadcast4(xb + t * a.cols + 4 * k));
        }
      }
    } else {
      const uint8_t* w = p.quants<K>(b);
      const __m512i low4 = _mm512_set1_epi8(0x0f);
      K25_UNROLL8
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_load_si512(w + 64 * k);
        const __m512i lo = _mm512_and_si512(v, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        K25_UNROLL8
        for (int t = 0; t < T; ++t) {
          dot[t] = _mm512_dpbusd_epi32(dot[t], lo, broadcast4(xb + t * a.cols + 4 * k));
          dot[t] = _mm512_dpbusd_epi32(dot[t], hi, broadcast4(xb + t * a.cols + 16 + 4 * k));
        }
      }
    }
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.scales<K>(b))));
    const float* dx = a.d + b * a.n_tokens + t0;
    K25_UNROLL8
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(dw, _mm512_set1_ps(dx[t])),
                               acc[t]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  K25_UNROLL8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * y_stride, mask, acc[t]);
}

// Prefill over two groups (32 rows) at once: each broadcast of x feeds both groups' dpbusd.
// On AMD Zen 5 a broadcast from memory costs a vector-pipe slot much like the dpbusd it feeds
// (a scratch loop of dpbusd ran at 7.7 per ns from registers, 4.0-4.9 with a broadcast each),
// so packed_tile spent about half its vector slots on broadcasts. Every (row, token) takes
// packed_tile's steps (exact integer dots, then the same float operations in the same order),
// so a token's result does not depend on whether its group was paired.
#define K25_PACKED_GROUP_PAIRS 1
constexpr int kPairTokens = 6;

template <QKind K, int T>
void packed_pair_tile(const PackedGroup& p0, const PackedGroup& p1, const QuantizedActs& a, int t0,
                      float* y, int64_t y_stride, int valid_rows1) {
  const int8_t* xq = a.q + t0 * a.cols;
  __m512 acc0[T], acc1[T];
  K25_UNROLL8
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const int32_t* bias = a.bias + b * a.n_tokens + t0;
    const int8_t* xb = xq + 32 * b;
    __m512i dot0[T], dot1[T];
    K25_UNROLL8
    for (int t = 0; t < T; ++t) dot0[t] = dot1[t] = _mm512_set1_epi32(bias[t]);
    const uint8_t* w0 = p0.quants<K>(b);
    const uint8_t* w1 = p1.quants<K>(b);
    // dot += v0 / v1 times the 4 quants of each token's x at offset o of the block.
    const auto step = [&](__m512i v0, __m512i v1, int o) {
      K25_UNROLL8
      for (int t = 0; t < T; ++t) {
        const __m512i x = broadcast4(xb + t * a.cols + o);
        dot0[t] = _mm512_dpbusd_epi32(dot0[t], v0, x);
        dot1[t] = _mm512_dpbusd_epi32(dot1[t], v1, x);
      }
    };
    if constexpr (K == QKind::kQ8) {
      K25_UNROLL8
      for (int k = 0; k < 8; ++k) {
        step(_mm512_load_si512(w0 + 64 * k), _mm512_load_si512(w1 + 64 * k), 4 * k);
      }
    } else {
      const __m512i low4 = _mm512_set1_epi8(0x0f);
      K25_UNROLL8
      for (int k = 0; k < 4; ++k) {
        const __m512i v0 = _mm512_load_si512(w0 + 64 * k);
        const __m512i v1 = _mm512_load_si512(w1 + 64 * k);
        step(_mm512_and_si512(v0, low4), _mm512_and_si512(v1, low4), 4 * k);
        step(_mm512_and_si512(_mm512_srli_epi16(v0, 4), low4),
             _mm512_and_si512(_mm512_srli_epi16(v1, 4), low4), 16 + 4 * k);
      }
    }
    const __m512 dw0 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0.scales<K>(b))));
    const __m512 dw1 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1.scales<K>(b))));
    const float* dx = a.d + b * a.n_tokens + t0;
    K25_UNROLL8
    for (int t = 0; t < T; ++t) {
      const __m512 d = _mm512_set1_ps(dx[t]);
      acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0[t]), _mm512_mul_ps(dw0, d), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1[t]), _mm512_mul_ps(dw1, d), acc1[t]);
    }
  }
  const __mmask16 mask1 = static_cast<__mmask16>((1u << valid_rows1) - 1);
  K25_UNROLL8
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(y + (t0 + t) * y_stride, acc0[t]);
    _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + kGroupRows, mask1, acc1[t]);
  }
}

using PackedPairTileFn = void (*)(const PackedGroup&, const PackedGroup&, const QuantizedActs&, int,
                                  float*, int64_t, int);
template <QKind K>
constexpr std::array<PackedPairTileFn, kPairTokens> packed_pair_tiles() {
  return {&packed_pair_tile<K, 1>, &packed_pair_tile<K, 2>, &packed_pair_tile<K, 3>,
          &packed_pair_tile<K, 4>, &packed_pair_tile<K, 5>, &packed_pair_tile<K, 6>};
}

// The integer dot of one Q4_0 block of a packed group with one token (plus its bias), in two
// independent dependency chains (integer sums are exact in any order).
inline __m512i q4_block_dot(const uint8_t* w, const int8_t* xb, int32_t bias) {
  __m512i d0 = _mm512_set1_epi32(bias);
  __m512i d1 = _mm512_setzero_si512();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  K25_UNROLL8
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_load_si512(w + 64 * k);
    d0 = _mm512_dpbusd_epi32(d0, _mm512_and_si512(v, low4), broadcast4(xb + 4 * k));
    d1 = _mm512_dpbusd_epi32(d1, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4),
                             broadcast4(xb + 16 + 4 * k));
  }
  return _mm512_add_epi32(d0, d1);
}

// Q4_0 decode (one token): the float arithmetic of packed_tile<kQ4, 1> (so a token's result is
// the same whatever else is in the call), with a software prefetch kPrefetchBytes ahead: from
// DRAM, the hardware prefetchers alone streamed the packed groups at 12 GB/s on one thread where
// q_row streams plain rows at 16.5 (Intel Xeon, measured); with a prefetch into L2, 17. Into L1
// (T0) is faster still on AMD Zen 5, as fast elsewhere: see kDecodePrefetchHint. The loop walks
// the group unit by unit with running pointers (recomputing each block's place from its index:
// 1.1B decode 2-4% slower at 2 threads), the unit's dots before their scales.
void q4_tile_decode(const PackedGroup& p, const QuantizedActs& a, int t0, float* y,
                    int64_t y_stride, int valid_rows) {
  constexpr QKind K = QKind::kQ4;
  const int64_t step = a.n_tokens;
  const int8_t* xb = a.q + t0 * a.cols;
  const int32_t* bias = a.bias + t0;
  const float* dx = a.d + t0;
  // d_w d_x of the 16 rows of block i of the unit at `unit`, with its activations' d.
  const auto scale = [](const uint8_t* unit, int i, float d) {
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + kUnits<K>.scales_in_unit(i))));
    return _mm512_mul_ps(dw, _mm512_set1_ps(d));
  };
  __m512 acc = _mm512_setzero_ps();
  const uint8_t* unit = p.base;
  int64_t b = 0;
  for (; b + kPackedUnitBlocks <= a.n_blocks;
       b += kPackedUnitBlocks, unit += kUnits<K>.unit_bytes(), xb += 32 * kPackedUnitBlocks,
       bias += kPackedUnitBlocks * step, dx += kPackedUnitBlocks * step) {
    prefetch_ahead(unit, kUnits<K>.unit_bytes());
    __m512i dot[kPackedUnitBlocks];
    K25_UNROLL
    for (int i = 0; i < kPackedUnitBlocks; ++i) {
      dot[i] = q4_block_dot(unit + kUnits<K>.quants_in_unit(i), xb + 32 * i, bias[i * step]);
    }
    K25_UNROLL
    for (int i = 0; i < kPackedUnitBlocks; ++i) {
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), scale(unit, i, dx[i * step]), acc);
    }
  }
  for (int i = 0; b < a.n_blocks; ++b, ++i) {  // a last unit short of blocks
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q4_block_dot(unit + kUnits<K>.quants_in_unit(i),
                                                          xb + 32 * i, bias[i * step])),
                          scale(unit, i, dx[i * step]), acc);
  }
  _mm512_mask_storeu_ps(y + t0 * y_stride, static_cast<__mmask16>((1u << valid_rows) - 1), acc);
}

using PackedTileFn = void (*)(const PackedGroup&, const QuantizedActs&, int, float*, int64_t, int);
// Q8_0 decodes in 256-bit halves, as the avxvnni set does (packed_halves_256.h): lanes are rows,
// so each row's integer and float steps are packed_tile<kQ8, 1>'s and so is the result. On AMD
// Zen 5 a 512-bit loop like q4_tile_decode streamed Q8_0 from DRAM slower, though faster in L2
// (1.1B decode, alternating runs, 5 rounds, tok/s 512-bit -> halves: 1 thread 21.1-23.2 ->
// 23.6-24.5, 2 threads 39.7-42.7 -> 43.4-48.7; kernels_bench, one stream per core: from DRAM
// 22-26 -> 27-31 GB/s, in L2 104-128 -> 95). Q4_0's nibble steps kept the 512-bit loop ahead (in
// L2 71 against 52 GB/s, from DRAM within noise). Not measured on Intel.
// kSymmetricQ8 (vnni.h) changes nothing here: dpbusd takes any quant.
template <QKind K, bool kSymmetricQ8>
constexpr std::array<PackedTileFn, kPackTokens> packed_tiles() {
  constexpr PackedTileFn decode =
      K == QKind::kQ8 ? &halves_tile_decode<QKind::kQ8, kSymmetricQ8> : &q4_tile_decode;
  return {decode,
          &packed_tile<K, 2>,
          &packed_tile<K, 3>,
          &packed_tile<K, 4>,
          &packed_tile<K, 5>,
          &packed_tile<K, 6>,
          &packed_tile<K, 7>,
          &packed_tile<K, 8>};
}

// The activations' bias per block: the whole correction for the weights' unsigned offset.
constexpr int32_t packed_bias_multiplier(QKind kind) {
  return kind == QKind::kQ8 ? 128 : 8;
}
