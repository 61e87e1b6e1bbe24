// The 256-bit packed matmul tiles (the avx2 and avxvnni sets), included by matmul.cpp inside its
// namespace after packed_halves_256.h, whose halves, integer steps and decode loop they use.

// Prefill tiles: both halves (16 rows) x up to 3 tokens, so each broadcast of x feeds two
// halves; 6 integer accumulators beside both halves' pieces. 4 tokens were no faster at 512
// tokens (Q8_0 slower), 6 spilled (half the speed).
constexpr int kPackTokens = 3;

// y for halves [0, H) of a packed group (the first valid_rows of its rows) and tokens
// [t0, t0 + T). kSymmetricQ8: see block_dots.
template <QKind K, int T, int H, bool kSymmetricQ8>
void packed_halves_tile(const PackedGroup& p, const QuantizedActs& a, int t0, float* y,
                        int64_t y_stride, int valid_rows) {
  const int8_t* xq = a.q + t0 * a.cols;
  const int8_t* xa = kSymmetricQ8 ? a.q_abs + t0 * a.cols : nullptr;
  __m256 acc[H][T];
  K25_UNROLL
  for (int h = 0; h < H; ++h) {
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    __m256i dot[H][T];
    block_dots<K, T, H, kSymmetricQ8>(p.quants<K>(b), xq + 32 * b,
                                      kSymmetricQ8 ? xa + 32 * b : nullptr, a.cols,
                                      a.bias + b * a.n_tokens + t0, dot);
    const float* dx = a.d + b * a.n_tokens + t0;
    K25_UNROLL
    for (int h = 0; h < H; ++h) {
      const __m256 dw = half_block_dw(p.scales<K>(b), h);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][t]),
                                    _mm256_mul_ps(dw, _mm256_set1_ps(dx[t])), acc[h][t]);
      }
    }
  }
  K25_UNROLL
  for (int h = 0; h < H; ++h) {
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      store_rows(y + (t0 + t) * y_stride + kHalfRows * h, acc[h][t], valid_rows - kHalfRows * h);
    }
  }
}

// Prefill: both halves at once when the group has rows in both.
template <QKind K, int T, bool kSymmetricQ8>
void packed_tile(const PackedGroup& p, const QuantizedActs& a, int t0, float* y, int64_t y_stride,
                 int valid_rows) {
  if (valid_rows > kHalfRows) {
    packed_halves_tile<K, T, 2, kSymmetricQ8>(p, a, t0, y, y_stride, valid_rows);
  } else {
    packed_halves_tile<K, T, 1, kSymmetricQ8>(p, a, t0, y, y_stride, valid_rows);
  }
}

using PackedTileFn = void (*)(const PackedGroup&, const QuantizedActs&, int, float*, int64_t, int);
// kSymmetricQ8: for groups whose Q8_0 quants are in [-127, 127] (kernels/repack.h).
template <QKind K, bool kSymmetricQ8>
constexpr std::array<PackedTileFn, kPackTokens> packed_tiles() {
  return {&halves_tile_decode<K, kSymmetricQ8>, &packed_tile<K, 2, kSymmetricQ8>,
          &packed_tile<K, 3, kSymmetricQ8>};
}

// The activations' bias per block: the whole correction for the weights' unsigned offset.
constexpr int32_t packed_bias_multiplier(QKind kind) {
#if defined(K25_MATMUL_VNNI)
  return kind == QKind::kQ8 ? 128 : 8;
#else
  return kind == QKind::kQ8 ? 0 : 8;
#endif
}
