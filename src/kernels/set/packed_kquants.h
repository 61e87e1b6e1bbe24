// Q4_K, Q5_K and Q6_K matmul on weights repacked at load (layouts in kernels/repack.h), included by
// matmul.cpp inside its namespace after the packed tiles. One vector lane per weight row: the
// avx512 set takes a group's 16 rows in one 512-bit vector, the avx2 and avxvnni sets the two
// halves of 8 rows in 256-bit vectors (Lanes512, Lanes256: the few operations the kernels use).
//
// Per super-block, rows and token, all in exact integers:
// - the dot of each sub-block's unsigned quants with x: VNNI: dpbusd, then a multiply by the
//   sub-block's scale; AVX2: maddubs summed in 16 bits over as many pieces as cannot overflow,
//   then widened by one madd with the scale in both 16-bit halves of its lane;
// - Q4_K, Q5_K: summ = sum of min_s x (sum of x over sub-block s), 4 madds of the byte-pair
//   minimums with the activations' sub-block sums; Q6_K: the quants' offset of 32 as 32 x sum
//   of scale_s x (sum of x over sub-block s), 8 madds of scale pairs with the Q8_K bsums.
// Then acc += (d dx) sumi (Q4_K, Q5_K: acc -= (dmin dx) summ) in float: the same steps for a token
// in every tile size and in decode, so its result does not depend on the other tokens of the call.

// Activations as Q8_K rows (llama.cpp's rounding, as the file-layout kernels take them) plus, for
// Q4_K and Q5_K, per token and super-block the sums of x over sub-blocks 2q and 2q + 1 as two
// int16.
struct PackedKActs {
  const uint8_t* rows;
  size_t row_bytes;
  const int32_t* min_pairs;  // Q4_K, Q5_K: [(t * n_super + b) * 4 + q]
  int64_t n_super;

  const BlockQ8_K& block(int t, int64_t b) const {
    return reinterpret_cast<const BlockQ8_K*>(rows + t * row_bytes)[b];
  }
};

inline int32_t load4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 8 rows per vector.
struct Lanes256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kRows = 8;
  static I zero() { return _mm256_setzero_si256(); }
  static I bytes(char b) { return _mm256_set1_epi8(b); }
  static I dword(int32_t v) { return _mm256_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static I band(I a, I b) { return _mm256_and_si256(a, b); }
  static I bor(I a, I b) { return _mm256_or_si256(a, b); }
  template <int N>
  static I srl16(I a) {
    return _mm256_srli_epi16(a, N);
  }
  template <int N>
  static I sll16(I a) {
    return _mm256_slli_epi16(a, N);
  }
  static I srl16n(I a, int n) { return _mm256_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  template <int N>
  static I sll32(I a) {
    return _mm256_slli_epi32(a, N);
  }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I mul32(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I madd16(I a, I b) { return _mm256_madd_epi16(a, b); }
#if defined(K25_MATMUL_VNNI)
  static I dpbusd(I acc, I u8, I s8) {
    return K25_DPBUSD256(acc, u8, s8);
  }
#else
  static I add16(I a, I b) {
    return _mm256_add_epi16(a, b);
  }
  static I maddubs(I u8, I s8) {
    return _mm256_maddubs_epi16(u8, s8);
  }
  // The low (Odd false) or high int16 of each lane in both of its halves.
  template <bool Odd>
  static I dup16(I a) {
    return Odd ? _mm256_blend_epi16(_mm256_srli_epi32(a, 16), a, 0xAA)
               : _mm256_blend_epi16(a, _mm256_slli_epi32(a, 16), 0xAA);
  }
#endif
  // The low (Odd false) or high int16 of each lane, sign-extended to the lane.
  template <bool Odd>
  static I sign_extend16(I a) {
    return Odd ? _mm256_srai_epi32(a, 16) : _mm256_srai_epi32(_mm256_slli_epi32(a, 16), 16);
  }
  static I u8_to_i32(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I u8_to_i16(const uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I s8_to_i16(const uint8_t* p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F f16_to_f32(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F load_f32(const float* p) {
    return _mm256_loadu_ps(p);
  }
  static F fzero() {
    return _mm256_setzero_ps();
  }
  static F fset(float v) {
    return _mm256_set1_ps(v);
  }
  static F fmul(F a, F b) {
    return _mm256_mul_ps(a, b);
  }
  static F fmadd(I i, F s, F acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), s, acc);
  }
  static F fnmadd(I i, F s, F acc) {
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(i), s, acc);
  }
  static void store(float* y, F v, int valid) {
    store_rows(y, v, valid);
  }
};

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// 16 rows per vector (the avx512 set, always with VNNI).
struct Lanes512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kRows = 16;
  static I zero() { return _mm512_setzero_si512(); }
  static I bytes(char b) { return _mm512_set1_epi8(b); }
  static I dword(int32_t v) { return _mm512_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm512_load_si512(p); }
  static I band(I a, I b) { return _mm512_and_si512(a, b); }
  static I bor(I a, I b) { return _mm512_or_si512(a, b); }
  template <int N>
  static I srl16(I a) {
    return _mm512_srli_epi16(a, N);
  }
  template <int N>
  static I sll16(I a) {
    return _mm512_slli_epi16(a, N);
  }
  static I srl16n(I a, int n) { return _mm512_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  template <int N>
  static I sll32(I a) {
    return _mm512_slli_epi32(a, N);
  }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I mul32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I madd16(I a, I b) { return _mm512_madd_epi16(a, b); }
  static I dpbusd(I acc, I u8, I s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
  template <bool Odd>
  static I sign_extend16(I a) {
    return Odd ? _mm512_srai_epi32(a, 16) : _mm512_srai_epi32(_mm512_slli_epi32(a, 16), 16);
  }
  static I u8_to_i32(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I u8_to_i16(const uint8_t* p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I s8_to_i16(const uint8_t* p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F f16_to_f32(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_f32(const float* p) { return _mm512_loadu_ps(p); }
  static F fzero() { return _mm512_setzero_ps(); }
  static F fset(float v) { return _mm512_set1_ps(v); }
  static F fmul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(I i, F s, F acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
  static F fnmadd(I i, F s, F acc) { return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
  static void store(float* y, F v, int valid) {
    if (valid > 0) _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << valid) - 1), v);
  }
};
using PackedKLanes = Lanes512;
#else
using PackedKLanes = Lanes256;
#endif

// Tokens per prefill tile: 4 on every set (avx2, Q4_K: 195 GFLOP/s against 156 with 2).
constexpr int kPackedKTokens = 4;

// The integer dot of the unsigned quant vectors q(p, i) (4 quants of each row of part p, i < N)
// with the 4 activation quants at x[t] + 4 i, per row lane, times scale[p] (pair_scale,
// byte_scale), added to sum[p * T + t] for P parts and T tokens: each broadcast of x feeds every
// part. VNNI: dpbusd, then one multiply; with one token and one part, two dependency chains.
// AVX2: maddubs summed in 16 bits over Pieces16 pieces (which must not overflow), then a madd
// with the scale in both halves of each lane.
template <typename L, int T, int P, int N, int Pieces16, typename Quants>
[[gnu::always_inline]] inline void scaled_dots(const Quants& q, const int8_t* const* x,
                                               const typename L::I* scale, typename L::I* sum) {
  using I = typename L::I;
#if defined(K25_MATMUL_VNNI)
  constexpr int kChains = T * P == 1 ? 2 : 1;
  I dot[kChains][P * T];
  K25_UNROLL
  for (int c = 0; c < kChains; ++c) {
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt) dot[c][pt] = L::zero();
  }
  K25_UNROLL8
  for (int i = 0; i < N; ++i) {
    I w[P];
    K25_UNROLL
    for (int p = 0; p < P; ++p) w[p] = q(p, i);
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      const I xb = L::dword(load4(x[t] + 4 * i));
      K25_UNROLL
      for (int p = 0; p < P; ++p) {
        I& d = dot[i % kChains][p * T + t];
        d = L::dpbusd(d, w[p], xb);
      }
    }
  }
  K25_UNROLL
  for (int pt = 0; pt < P * T; ++pt) {
    const I d = kChains == 2 ? L::add32(dot[0][pt], dot[kChains - 1][pt]) : dot[0][pt];
    sum[pt] = L::add32(sum[pt], L::mul32(d, scale[pt / T]));
  }
#else
  K25_UNROLL
  for (int i0 = 0; i0 < N; i0 += Pieces16) {
    I dot16[P * T];
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt) dot16[pt] = L::zero();
    K25_UNROLL8
    for (int i = i0; i < i0 + Pieces16; ++i) {
      I w[P];
      K25_UNROLL
      for (int p = 0; p < P; ++p) w[p] = q(p, i);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const I xb = L::dword(load4(x[t] + 4 * i));
        K25_UNROLL
        for (int p = 0; p < P; ++p) {
          I& d = dot16[p * T + t];
          d = L::add16(d, L::maddubs(w[p], xb));
          keep_as_chain(d);
        }
      }
    }
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt)
      sum[pt] = L::add32(sum[pt], L::madd16(dot16[pt], scale[pt / T]));
  }
#endif
}

// The scale of the low (Odd false) or high int16 of each lane of `pairs`, as scaled_dots takes it
// (VNNI: int32 lanes; AVX2: in both 16-bit halves).
template <typename L, bool Odd>
[[gnu::always_inline]] inline typename L::I pair_scale(typename L::I pairs) {
#if defined(K25_MATMUL_VNNI)
  return L::template sign_extend16<Odd>(pairs);
#else
  return L::template dup16<Odd>(pairs);
#endif
}

// The unsigned byte scales of the rows at p, as scaled_dots takes them.
template <typename L>
[[gnu::always_inline]] inline typename L::I byte_scale(const uint8_t* p) {
#if defined(K25_MATMUL_VNNI)
  return L::u8_to_i32(p);
#else
  return L::template dup16<false>(L::u8_to_i32(p));
#endif
}

// Q4_K and Q5_K: pieces 8j..8j+7 hold sub-block 2j in their low nibbles and 2j + 1 in their
// high ones; Q5_K's fifth bits are bits 2j and 2j + 1 of qh piece k (bytes 4k..4k+3 of qh).
template <DType D>
struct PackedK4 {
  static constexpr DType kType = D;
  static constexpr bool kFifthBit = D == DType::Q5_K;
  static constexpr PackedK4Layout kLayout = PackedK4Layout::of(kFifthBit);
  static constexpr size_t kSuperBytes = kLayout.bytes;

  // acc[p * T + t] += the products of the rows of parts part0 + p (L::kRows rows from row
  // L::kRows * (part0 + p)), p < P, of super-block b (at sb) with tokens [t0, t0 + T).
  template <typename L, int T, int P>
  [[gnu::always_inline]] static void rows(const uint8_t* sb, int part0, const PackedKActs& a,
                                          int t0, int64_t b, typename L::F acc[P * T]) {
    using I = typename L::I;
    constexpr int R = L::kRows;
    // maddubs sums in 16 bits: 2 products of at most 15 (31 with the fifth bit) x 127 a piece.
    constexpr int kPieces16 = kFifthBit ? 4 : 8;
    const uint8_t* quants = sb + 4 * R * part0;
    const uint8_t* high = sb + kLayout.high + 4 * R * part0;
    const uint8_t* scales = sb + kLayout.scales + R * part0;
    const uint8_t* mins = sb + kLayout.mins + 2 * R * part0;
    const auto* d16 = reinterpret_cast<const uint16_t*>(sb + kLayout.d) + R * part0;
    const auto* dmin16 = reinterpret_cast<const uint16_t*>(sb + kLayout.dmin) + R * part0;
    const I low4 = L::bytes(0x0f);
    const I bit4 = L::bytes(0x10);
    I sumi[P * T];
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt) sumi[pt] = L::zero();
    for (int j = 0; j < 4; ++j) {
      const uint8_t* w = quants + 64 * 8 * j;
      const int8_t* x[T];
      const int8_t* x_hi[T];
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        x[t] = a.block(t0 + t, b).qs + 64 * j;
        x_hi[t] = x[t] + 32;
      }
      // Part p's bytes of a piece are 4 R p after part0's.
      // Q5_K: bit 2j (2j + 1) of each qh byte moved to bit 4 (bit 0, 1 of the shifted byte).
      const auto fifth = [&](int p, int k, auto to_bit4) {
        return L::band(to_bit4(L::srl16n(L::load(high + 64 * k + 4 * R * p), 2 * j)), bit4);
      };
      const auto lo = [&](int p, int k) {
        const I q = L::band(L::load(w + 64 * k + 4 * R * p), low4);
        if constexpr (kFifthBit) {
          return L::bor(q, fifth(p, k, [](I h) { return L::template sll16<4>(h); }));
        } else {
          return q;
        }
      };
      I scale[P];
      K25_UNROLL
      for (int p = 0; p < P; ++p) scale[p] = byte_scale<L>(scales + 16 * 2 * j + R * p);
      scaled_dots<L, T, P, 8, kPieces16>(lo, x, scale, sumi);
      const auto hi = [&](int p, int k) {
        const I q = L::band(L::template srl16<4>(L::load(w + 64 * k + 4 * R * p)), low4);
        if constexpr (kFifthBit) {
          return L::bor(q, fifth(p, k, [](I h) { return L::template sll16<3>(h); }));
        } else {
          return q;
        }
      };
      K25_UNROLL
      for (int p = 0; p < P; ++p) scale[p] = byte_scale<L>(scales + 16 * (2 * j + 1) + R * p);
      scaled_dots<L, T, P, 8, kPieces16>(hi, x_hi, scale, sumi);
    }
    I summ[P * T];
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt) summ[pt] = L::zero();
    K25_UNROLL
    for (int q = 0; q < 4; ++q) {
      I pair[P];
      K25_UNROLL
      for (int p = 0; p < P; ++p) pair[p] = L::u8_to_i16(mins + 32 * q + 2 * R * p);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const I x_sums = L::dword(a.min_pairs[((t0 + t) * a.n_super + b) * 4 + q]);
        K25_UNROLL
        for (int p = 0; p < P; ++p) {
          summ[p * T + t] = L::add32(summ[p * T + t], L::madd16(pair[p], x_sums));
        }
      }
    }
    K25_UNROLL
    for (int p = 0; p < P; ++p) {
      const auto d = L::f16_to_f32(d16 + R * p);
      const auto dmin = L::f16_to_f32(dmin16 + R * p);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const auto dx = L::fset(a.block(t0 + t, b).d);
        typename L::F& f = acc[p * T + t];
        f = L::fmadd(sumi[p * T + t], L::fmul(d, dx), f);
        f = L::fnmadd(summ[p * T + t], L::fmul(dmin, dx), f);
      }
    }
  }
};
using PackedQ4k = PackedK4<DType::Q4_K>;
using PackedQ5k = PackedK4<DType::Q5_K>;

// Q6_K on the layout of kernels/repack.h: piece 8n + k of A, B and C gives elements 4k..4k+3
// of the four groups e of half n (element 128n + 32e + l); sub-block s (of 16) = 8n + 2e + l / 16.
struct PackedQ6k {
  static constexpr DType kType = DType::Q6_K;
  static constexpr size_t kSuperBytes = kPackedQ6kSuperBytes;

  // The 6-bit quants (0..63) of group e from pieces of A, B and C.
  template <typename L>
  static typename L::I quants(int e, const uint8_t* a, const uint8_t* b, const uint8_t* c) {
    const auto six = L::bytes(0x3f);
    const auto low4 = L::bytes(0x0f);
    const auto top2 = L::bytes(0x30);
    switch (e) {
      case 0:
        return L::band(L::load(a), six);
      case 1:
        return L::band(L::load(b), six);
      case 2:
        return L::bor(L::band(L::load(c), low4), L::band(L::template srl16<2>(L::load(a)), top2));
      default:
        return L::bor(L::band(L::template srl16<4>(L::load(c)), low4),
                      L::band(L::template srl16<2>(L::load(b)), top2));
    }
  }

  // As PackedK4::rows.
  template <typename L, int T, int P>
  [[gnu::always_inline]] static void rows(const uint8_t* sb, int part0, const PackedKActs& a,
                                          int t0, int64_t b, typename L::F acc[P * T]) {
    using I = typename L::I;
    constexpr int R = L::kRows;
    const uint8_t* qa = sb + 4 * R * part0;
    const uint8_t* qb = sb + packed_q6k::kB + 4 * R * part0;
    const uint8_t* qc = sb + packed_q6k::kC + 4 * R * part0;
    const uint8_t* scale_pairs = sb + packed_q6k::kScalePairs + 2 * R * part0;
    const float* dw = reinterpret_cast<const float*>(sb + packed_q6k::kD) + R * part0;
    const BlockQ8_K* x[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) x[t] = &a.block(t0 + t, b);
    I sumi[P * T];
    K25_UNROLL
    for (int pt = 0; pt < P * T; ++pt) sumi[pt] = L::zero();
    for (int n = 0; n < 2; ++n) {
      for (int e = 0; e < 4; ++e) {
        // Sub-blocks 8n + 2e (m = 0) and 8n + 2e + 1 (m = 1): the int16 halves of the lanes.
        I pairs[P];
        K25_UNROLL
        for (int p = 0; p < P; ++p)
          pairs[p] = L::s8_to_i16(scale_pairs + 32 * (4 * n + e) + 2 * R * p);
        // The quants' offset of both sub-blocks: 32 x scale x (sum of x over the sub-block).
        K25_UNROLL
        for (int t = 0; t < T; ++t) {
          const I bsums = L::dword(load4(x[t]->bsums + 2 * (4 * n + e)));
          K25_UNROLL
          for (int p = 0; p < P; ++p) {
            const I offset = L::madd16(pairs[p], bsums);
            sumi[p * T + t] = L::sub32(sumi[p * T + t], L::template sll32<5>(offset));
          }
        }
        K25_UNROLL
        for (int m = 0; m < 2; ++m) {
          const int8_t* xs[T];
          K25_UNROLL
          for (int t = 0; t < T; ++t) xs[t] = x[t]->qs + 128 * n + 32 * e + 16 * m;
          const auto q = [&](int p, int i) {
            const int k = 4 * m + i;
            const size_t piece = 64 * (8 * n + k) + 4 * R * p;
            return quants<L>(e, qa + piece, qb + piece, qc + piece);
          };
          // 2 pieces x 2 products of at most 63 x 127 per 16-bit lane.
          I scale[P];
          K25_UNROLL
          for (int p = 0; p < P; ++p) {
            scale[p] = m == 0 ? pair_scale<L, false>(pairs[p]) : pair_scale<L, true>(pairs[p]);
          }
          scaled_dots<L, T, P, 4, 2>(q, xs, scale, sumi);
        }
      }
    }
    K25_UNROLL
    for (int p = 0; p < P; ++p) {
      const auto d = L::load_f32(dw + R * p);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        typename L::F& f = acc[p * T + t];
        f = L::fmadd(sumi[p * T + t], L::fmul(d, L::fset(x[t]->d)), f);
      }
    }
  }
};

// y for the 16 rows of a group (the first valid_rows of them) and tokens [t0, t0 + T), one
// vector of rows at a time; the group (2-3 KB per super-block) stays in L1/L2 while the tokens
// pass.
template <typename Kind, int T>
void packed_k_tile(const uint8_t* group, const PackedKActs& a, int t0, float* y, int64_t y_stride,
                   int valid_rows) {
  using L = PackedKLanes;
  for (int part = 0; part < kGroupRows / L::kRows; ++part) {
    if (valid_rows <= L::kRows * part) break;
    typename L::F acc[T];
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[t] = L::fzero();
    for (int64_t b = 0; b < a.n_super; ++b) {
      Kind::template rows<L, T, 1>(group + b * Kind::kSuperBytes, part, a, t0, b, acc);
    }
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      L::store(y + (t0 + t) * y_stride + L::kRows * part, acc[t], valid_rows - L::kRows * part);
    }
  }
}

// Decode (one token): every row of each super-block in one pass, each broadcast of x shared by
// the parts, so the group is read once as one sequential stream, prefetched kPrefetchBytes ahead
// (kDecodePrefetchHint).
template <typename Kind>
void packed_k_tile_decode(const uint8_t* group, const PackedKActs& a, int t0, float* y,
                          int64_t y_stride, int valid_rows) {
  using L = PackedKLanes;
  constexpr int kParts = kGroupRows / L::kRows;
  typename L::F acc[kParts];
  K25_UNROLL
  for (int part = 0; part < kParts; ++part) acc[part] = L::fzero();
  for (int64_t b = 0; b < a.n_super; ++b) {
    const uint8_t* sb = group + b * Kind::kSuperBytes;
    prefetch_ahead(sb, Kind::kSuperBytes);
    Kind::template rows<L, 1, kParts>(sb, 0, a, t0, b, acc);
  }
  K25_UNROLL
  for (int part = 0; part < kParts; ++part) {
    L::store(y + t0 * y_stride + L::kRows * part, acc[part], valid_rows - L::kRows * part);
  }
}

using PackedKTileFn = void (*)(const uint8_t*, const PackedKActs&, int, float*, int64_t, int);
template <typename Kind>
constexpr std::array<PackedKTileFn, kPackedKTokens> packed_k_tiles() {
  return {&packed_k_tile_decode<Kind>, &packed_k_tile<Kind, 2>, &packed_k_tile<Kind, 3>,
          &packed_k_tile<Kind, 4>};
}
