// Attention for the queries that share one KV head, GEMM-like: scores for a block of 4 queries
// and a few keys (4 on AVX-512, 2 on AVX2) are accumulated in registers (each key and query chunk
// loaded once for several products), exponentials run per query, then the values are summed with
// the outputs of 4 queries in registers. Keys and values are visited in tiles of up to 64
// positions and every 4-query block uses a tile while it is in L1, so a prefill task of many
// queries reads the cached rows from memory once, not once per block. Needs AVX-512 and a head
// size that is a multiple of 64, or AVX2 and a multiple of 16; heads of 8, 16 or 24 elements take
// the narrow path (attend_narrow); otherwise each query runs dot_f32 / softmax / axpy on its own.
// Every function is a template on the stored element type: float (KvDtype::kF32) or Half
// (kF16), widened to float where it is loaded (in registers, or one row at a time on the
// portable path), so both types run the same float operations in the same order.
#include "kernels/attention.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"
#include "kernels/set/x86_intrinsics.h"

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source, which
// -Wuninitialized reports at every use.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k25::K25_KERNEL_SET {
namespace {

using Half = uint16_t;  // IEEE binary16 bits

inline float round_to_f16(float x) {
  return half_to_float(float_to_half(x));
}

// A row of n elements as floats: the row itself, or its widened copy in `buffer`.
template <typename T>
const float* as_floats(const T* row, int n, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    kv_load_row(KvDtype::kF16, row, buffer, n);
    return buffer;
  }
}

// Calls row(p, key_or_value_row) for the positions [first, stop) of the spans, in order.
template <typename T, typename Fn>
void for_each_row(const KvSpan* spans, int n_spans, int first, int stop, bool values, int kv_stride,
                  Fn&& row) {
  int span_start = 0;
  for (int s = 0; s < n_spans && span_start < stop; span_start += spans[s].n, ++s) {
    const int begin = std::max(first, span_start), end = std::min(stop, span_start + spans[s].n);
    const T* rows = static_cast<const T*>(values ? spans[s].values : spans[s].keys);
    for (int p = begin; p < end; ++p) {
      row(p, rows + static_cast<size_t>(p - span_start) * kv_stride);
    }
  }
}

// Softmax of scores[first, n_pos) in place, up to its division: returns the factor the weighted
// sum of values still needs. With an F16 cache the probabilities are divided and rounded to F16
// here (factor 1), as llama.cpp's F16-cache attention multiplies F16 probabilities with F16
// values; its quantised models amplify that rounding, so k25 reproduces it.
// The largest of x[0, n) (n > 0), in vector registers: a max is exact in any order.
inline float row_max(const float* x, int n) {
  int i = 0;
  float m = x[0];
#if defined(__AVX512F__)
  if (n >= 16) {
    __m512 v = _mm512_loadu_ps(x);
    for (i = 16; i + 16 <= n; i += 16) v = _mm512_max_ps(v, _mm512_loadu_ps(x + i));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, v);
    m = *std::max_element(lanes, lanes + 16);
  }
#elif defined(__AVX2__)
  if (n >= 8) {
    __m256 v = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    m = *std::max_element(lanes, lanes + 8);
  }
#endif
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// `stats`, when set, gets the window's largest score and exp sum (AttentionQuery::stats).
template <typename T>
float normalise_probabilities(float* scores, int first, int n_pos, float* stats) {
  if (stats != nullptr) stats[0] = row_max(scores + first, n_pos - first);
  const float sum = exp_minus_max(scores + first, n_pos - first);
  if (stats != nullptr) stats[1] = sum;
  const float inv_sum = 1.0f / sum;
  if constexpr (std::is_same_v<T, float>) {
    return inv_sum;
  } else {
    int p = first;
#if defined(__F16C__)
    // Eight at a time through the conversions round_to_f16 uses one by one (it was a tenth of
    // a serving run's time on the avx2 set).
    const __m256 scale = _mm256_set1_ps(inv_sum);
    for (; p + 8 <= n_pos; p += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(scores + p), scale);
      _mm256_storeu_ps(scores + p, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
    }
#endif
    for (; p < n_pos; ++p) scores[p] = round_to_f16(scores[p] * inv_sum);
    return 1.0f;
  }
}

// Each query separately: the portable path. `row` is scratch for one widened row.
template <typename T>
void attend_one(const AttentionQuery& query, const KvSpan* spans, int n_spans, int kv_stride,
                int head_dim, float scale, float* scores, float* row) {
  for_each_row<T>(spans, n_spans, query.first, query.n_pos, false, kv_stride,
                  [&](int p, const T* key) {
                    scores[p] = dot_f32(query.q, as_floats(key, head_dim, row), head_dim) * scale;
                  });
  const float inv_sum = normalise_probabilities<T>(scores, query.first, query.n_pos, query.stats);
  std::fill(query.out, query.out + head_dim, 0.0f);
  for_each_row<T>(spans, n_spans, query.first, query.n_pos, true, kv_stride,
                  [&](int p, const T* value) {
                    axpy(query.out, scores[p], as_floats(value, head_dim, row), head_dim);
                  });
  if (inv_sum != 1.0f) {
    for (int d = 0; d < head_dim; ++d) query.out[d] *= inv_sum;
  }
}

#if defined(__AVX2__)
// Heads of 8, 16 or 24 elements (stories260K's are 8) are too narrow for the blocked kernels, and
// a dot_f32 or axpy call per position cost more than its arithmetic (83% of stories260K's decode).
// Here the keys come 8 positions at a time, transposed once (8 x 8 blocks: element d of the 8 rows
// in one vector) for up to kNarrowScoreQueries queries, each of which then gets its 8 scores from
// head_dim multiply-adds with its elements broadcast; the values of up to kNarrowGroup queries are
// summed in registers in one pass over the rows. So the queries of a verify step or a GQA group
// share that work. A score is q[0] k[0], then fused multiply-adds of q[d] k[d] in order of d,
// then times the scale; an output element is axpy's fused multiply-adds in position order. Those
// do not depend on the other queries, the spans or the position's place in its block.
constexpr int kNarrowScoreQueries = 16;
constexpr int kNarrowGroup = 4;

inline bool is_narrow_head(int head_dim) {
  return head_dim % 8 == 0 && head_dim < 32;
}

// 8 consecutive elements as floats (also the AVX2 blocked kernel's loads).
inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Rows j of the 8 x 8 block r[0..7] become its columns: c[d] element j = r[j] element d.
inline void transpose8(const __m256 r[8], __m256 c[8]) {
  __m256 t[8], u[8];
  for (int a = 0; a < 4; ++a) {
    t[2 * a] = _mm256_unpacklo_ps(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm256_unpackhi_ps(r[2 * a], r[2 * a + 1]);
  }
  for (int b = 0; b < 2; ++b) {
    u[4 * b] = _mm256_shuffle_ps(t[4 * b], t[4 * b + 2], 0x44);
    u[4 * b + 1] = _mm256_shuffle_ps(t[4 * b], t[4 * b + 2], 0xee);
    u[4 * b + 2] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0x44);
    u[4 * b + 3] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0xee);
  }
  for (int d = 0; d < 4; ++d) {
    c[d] = _mm256_permute2f128_ps(u[d], u[d + 4], 0x20);
    c[d + 4] = _mm256_permute2f128_ps(u[d], u[d + 4], 0x31);
  }
}

// scores + i * s_stride gets query i's scaled scores at every position of the 8-position blocks
// that meet its window (outside the window too: those are never read).
template <typename T, int C>
void narrow_scores(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                   int kv_stride, float scale, float* scores, size_t s_stride) {
  int lo = queries[0].first, hi = queries[0].n_pos;
  for (int i = 1; i < nq; ++i) {
    lo = std::min(lo, queries[i].first);
    hi = std::max(hi, queries[i].n_pos);
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  alignas(32) float kt[8 * C][8];  // element d of the block's 8 keys in kt[d]
  int span_start = 0;
  for (int s = 0; s < n_spans && span_start < hi; span_start += spans[s].n, ++s) {
    const int begin = std::max(lo, span_start), end = std::min(hi, span_start + spans[s].n);
    const T* keys = static_cast<const T*>(spans[s].keys);
    for (int p0 = begin; p0 < end; p0 += 8) {
      const int n = std::min(8, end - p0);
      const T* key = keys + static_cast<size_t>(p0 - span_start) * kv_stride;
      for (int c = 0; c < C; ++c) {
        __m256 rows[8], cols[8];
        for (int j = 0; j < 8; ++j) {
          rows[j] =
              j < n ? load8(key + static_cast<size_t>(j) * kv_stride + 8 * c) : _mm256_setzero_ps();
        }
        transpose8(rows, cols);
        for (int d = 0; d < 8; ++d) _mm256_store_ps(kt[8 * c + d], cols[d]);
      }
      for (int i = 0; i < nq; ++i) {
        if (p0 + n <= queries[i].first || p0 >= queries[i].n_pos) continue;
        const float* q = queries[i].q;
        __m256 sum = _mm256_mul_ps(_mm256_set1_ps(q[0]), _mm256_load_ps(kt[0]));
        for (int d = 1; d < 8 * C; ++d) {
          sum = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), _mm256_load_ps(kt[d]), sum);
        }
        sum = _mm256_mul_ps(sum, vscale);
        float* out = scores + i * s_stride + p0;
        if (n == 8) {
          _mm256_storeu_ps(out, sum);
        } else {
          alignas(32) float lanes[8];
          _mm256_store_ps(lanes, sum);
          std::copy(lanes, lanes + n, out);
        }
      }
    }
  }
}

// out += sum_p scores_g[p] v_p for the G queries over positions [first, stop), in position order.
// The sums live in local registers for the whole range (through a lambda they were stored to the
// stack after every multiply-add).
template <typename T, int C, int G>
inline void narrow_values_range(const KvSpan* spans, int n_spans, int kv_stride, int first,
                                int stop, const float* const* scores, __m256 (*acc)[C]) {
  __m256 sum[G][C];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) sum[g][c] = acc[g][c];
  }
  int span_start = 0;
  for (int s = 0; s < n_spans && span_start < stop; span_start += spans[s].n, ++s) {
    const int begin = std::max(first, span_start), end = std::min(stop, span_start + spans[s].n);
    const T* value = static_cast<const T*>(spans[s].values) +
                     static_cast<size_t>(std::max(0, begin - span_start)) * kv_stride;
    for (int p = begin; p < end; ++p, value += kv_stride) {
      __m256 v[C];
      for (int c = 0; c < C; ++c) v[c] = load8(value + 8 * c);
      for (int g = 0; g < G; ++g) {
        const __m256 w = _mm256_set1_ps(scores[g][p]);
        for (int c = 0; c < C; ++c) sum[g][c] = _mm256_fmadd_ps(w, v[c], sum[g][c]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) acc[g][c] = sum[g][c];
  }
}

// The weighted values of G queries: the positions all of them attend to in one pass, the others
// query by query before and after it, so each output sums its positions in order.
template <typename T, int C, int G>
void narrow_values(const AttentionQuery* queries, const KvSpan* spans, int n_spans, int kv_stride,
                   const float* const* scores, const float* inv_sum) {
  __m256 acc[G][C];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) acc[g][c] = _mm256_setzero_ps();
  }
  int lo = queries[0].first, hi = queries[0].n_pos;
  for (int g = 1; g < G; ++g) {
    lo = std::max(lo, queries[g].first);
    hi = std::min(hi, queries[g].n_pos);
  }
  hi = std::max(lo, hi);
  for (int g = 0; g < G; ++g) {
    const int head_end = lo == hi ? queries[g].n_pos : lo;
    narrow_values_range<T, C, 1>(spans, n_spans, kv_stride, queries[g].first, head_end, &scores[g],
                                 &acc[g]);
  }
  if (lo < hi) narrow_values_range<T, C, G>(spans, n_spans, kv_stride, lo, hi, scores, acc);
  for (int g = 0; g < G; ++g) {
    if (lo < hi) {
      narrow_values_range<T, C, 1>(spans, n_spans, kv_stride, hi, queries[g].n_pos, &scores[g],
                                   &acc[g]);
    }
    for (int c = 0; c < C; ++c) {
      __m256 out = acc[g][c];
      if (inv_sum[g] != 1.0f) out = _mm256_mul_ps(out, _mm256_set1_ps(inv_sum[g]));
      _mm256_storeu_ps(queries[g].out + 8 * c, out);
    }
  }
}

template <typename T, int C>
void attend_narrow(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                   int kv_stride, float scale, std::vector<float>& scratch) {
  int n = 0;
  for (int i = 0; i < nq; ++i) n = std::max(n, queries[i].n_pos);
  const size_t s_stride = static_cast<size_t>(n);
  scratch.resize(kNarrowScoreQueries * s_stride);
  for (int i0 = 0; i0 < nq; i0 += kNarrowScoreQueries) {
    const int n_scored = std::min(kNarrowScoreQueries, nq - i0);
    narrow_scores<T, C>(queries + i0, n_scored, spans, n_spans, kv_stride, scale, scratch.data(),
                        s_stride);
    for (int g0 = 0; g0 < n_scored; g0 += kNarrowGroup) {
      const int group = std::min(kNarrowGroup, n_scored - g0);
      const float* scores[kNarrowGroup];
      float inv_sum[kNarrowGroup];
      for (int g = 0; g < group; ++g) {
        const AttentionQuery& query = queries[i0 + g0 + g];
        float* row = scratch.data() + (g0 + g) * s_stride;
        inv_sum[g] = normalise_probabilities<T>(row, query.first, query.n_pos, query.stats);
        scores[g] = row;
      }
      const AttentionQuery* q = queries + i0 + g0;
      switch (group) {
        case 1:
          narrow_values<T, C, 1>(q, spans, n_spans, kv_stride, scores, inv_sum);
          break;
        case 2:
          narrow_values<T, C, 2>(q, spans, n_spans, kv_stride, scores, inv_sum);
          break;
        case 3:
          narrow_values<T, C, 3>(q, spans, n_spans, kv_stride, scores, inv_sum);
          break;
        default:
          narrow_values<T, C, 4>(q, spans, n_spans, kv_stride, scores, inv_sum);
          break;
      }
    }
  }
}
#endif  // __AVX2__

#if defined(__AVX512F__)
#define K25_ATTN_BLOCKED 1

constexpr int kQueries = 4;       // queries per dots_block call
constexpr int kKeys = 4;          // keys per dots_block call
constexpr int kValueCols = 64;    // output columns per weighted_values call
constexpr int kValueQueries = 4;  // 16 accumulators already; no wider call

// 16 consecutive elements as floats.
inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// The same, or zeros without reading memory when `present` is 0 (it is all or nothing).
inline __m512 load16_if(const float* p, __mmask16 present) {
  return _mm512_maskz_loadu_ps(present, p);
}
inline __m512 load16_if(const Half* p, __mmask16 present) {
  return present != 0 ? load16(p) : _mm512_setzero_ps();
}

// The 16 lane sums of v[0..15], v[i + 4 * j] landing in element 4 * i + j: pairs of vectors
// fold their halves together, then their 128-bit quarters, pairs and neighbours. Each sum
// takes the same additions in the same order wherever its vector sits in v.
inline __m512 reduce16(__m512 v[16]) {
  __m512 s[8], t[4], w[2];
  for (int a = 0; a < 8; ++a) {
    s[a] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * a], v[2 * a + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * a], v[2 * a + 1], 0xee));
  }
  for (int b = 0; b < 4; ++b) {
    t[b] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * b], s[2 * b + 1], 0x88),
                         _mm512_shuffle_f32x4(s[2 * b], s[2 * b + 1], 0xdd));
  }
  for (int c = 0; c < 2; ++c) {
    w[c] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * c], t[2 * c + 1], 0x44),
                         _mm512_shuffle_ps(t[2 * c], t[2 * c + 1], 0xee));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
}

// Dots of NQ <= 4 queries (queries[i].q) with n_keys <= kKeys keys at k, k + stride, ...:
// scores[i * s_stride + j]. A missing key's products are zeros, which leave the other sums bit for
// bit unchanged, so a score does not depend on how many keys or queries shared its call. (`spare`
// is the AVX2 kernel's: these stores are masked.)
template <int NQ, typename T>
void dots_block(const AttentionQuery* queries, const T* k, int stride, int n_keys, int head_dim,
                float scale, float* scores, int s_stride, bool /*spare*/) {
  __m512 acc[16];  // query i, key j at i + 4 * j
  for (auto& a : acc) a = _mm512_setzero_ps();
  __mmask16 present[kKeys];  // masked loads read nothing for missing keys
  for (int j = 0; j < kKeys; ++j) present[j] = j < n_keys ? 0xffff : 0;
  for (int c = 0; c < head_dim; c += 16) {
    __m512 kv[kKeys];
    for (int j = 0; j < kKeys; ++j) kv[j] = load16_if(k + j * stride + c, present[j]);
    for (int i = 0; i < NQ; ++i) {
      const __m512 qv = _mm512_loadu_ps(queries[i].q + c);
      for (int j = 0; j < kKeys; ++j) acc[i + 4 * j] = _mm512_fmadd_ps(qv, kv[j], acc[i + 4 * j]);
    }
  }
  const __m512 dots = _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(scale));
  const __mmask8 keep = static_cast<__mmask8>((1u << n_keys) - 1);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, dots);
  for (int i = 0; i < NQ; ++i) {
    _mm_mask_storeu_ps(scores + i * s_stride, keep, _mm_load_ps(lanes + 4 * i));
  }
}

// queries[i].out[c0, c0 + 64) += sum_{p in [p0, p1)} scores[i][p] * v_p[c0, c0 + 64), or = when
// `first`, for NQ queries (scores rows s_stride apart).
template <int NQ, typename T>
void weighted_values(const float* scores, int s_stride, const T* v, int kv_stride, int p0, int p1,
                     int c0, const AttentionQuery* queries, bool first) {
  __m512 acc[NQ][4];
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < 4; ++c) {
      acc[i][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(queries[i].out + c0 + 16 * c);
    }
  }
  v += c0;
  for (int p = p0; p < p1; ++p, v += kv_stride) {
    __m512 vv[4];
    for (int c = 0; c < 4; ++c) vv[c] = load16(v + 16 * c);
    for (int i = 0; i < NQ; ++i) {
      const __m512 w = _mm512_set1_ps(scores[i * s_stride + p]);
      for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_fmadd_ps(w, vv[c], acc[i][c]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(queries[i].out + c0 + 16 * c, acc[i][c]);
  }
}

#elif defined(__AVX2__)
#define K25_ATTN_BLOCKED 1
// 12 accumulators, a query and the keys fill the 16 ymm registers (the compiler takes some keys
// as memory operands); each query's 4 scores land in one 128-bit vector, stored as they are.
constexpr int kQueries = 3;
constexpr int kKeys = 4;
constexpr int kValueCols = 16;  // 2 vectors of output columns per query
// 12 accumulators, 2 value vectors and a broadcast probability fill the registers, 8 loads per
// 12 multiply-adds (4 queries: 6 per 8; 2 or 3 queries of 4 vectors were 10-25% slower).
constexpr int kValueQueries = 6;

// _mm256_hadd_ps(a, b) as two shuffles and an add: the same sums of the same neighbours, and
// the shuffles issue on more ports than hadd's.
inline __m256 pair_sums(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xdd));
}

// The 4 lane sums of v[0..3], element k = sum of v[k]: sums of neighbours, of pairs, then the
// two 128-bit halves. Every sum is ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)).
inline __m128 reduce4(const __m256 v[4]) {
  const __m256 g = pair_sums(pair_sums(v[0], v[1]), pair_sums(v[2], v[3]));
  return _mm_add_ps(_mm256_castps256_ps128(g), _mm256_extractf128_ps(g, 1));
}

// Dots of NQ queries (queries[i].q) with n_keys <= kKeys keys at k, k + stride, ...: scores[i *
// s_stride + j], for j < n_keys; when `spare` the call may also write zeros at j in [n_keys, kKeys)
// (the row has room there). A missing key reads nothing and its products are zeros, so a score does
// not depend on how many keys or queries shared its call.
template <int NQ, typename T>
void dots_block(const AttentionQuery* queries, const T* k, int stride, int n_keys, int head_dim,
                float scale, float* scores, int s_stride, bool spare) {
  __m256 acc[NQ][kKeys];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm256_setzero_ps();
  }
  bool present[kKeys];
  for (int j = 0; j < kKeys; ++j) present[j] = j < n_keys;
  for (int c = 0; c < head_dim; c += 8) {
    __m256 kv[kKeys];
    for (int j = 0; j < kKeys; ++j) {
      kv[j] = present[j] ? load8(k + j * stride + c) : _mm256_setzero_ps();
    }
    for (int i = 0; i < NQ; ++i) {
      const __m256 qv = _mm256_loadu_ps(queries[i].q + c);
      for (int j = 0; j < kKeys; ++j) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  const __m128 s = _mm_set1_ps(scale);
  for (int i = 0; i < NQ; ++i) {
    const __m128 dots = _mm_mul_ps(reduce4(acc[i]), s);
    float* row = scores + i * s_stride;
    if (n_keys == kKeys || spare) {
      _mm_storeu_ps(row, dots);
    } else {
      alignas(16) float lanes[kKeys];
      _mm_store_ps(lanes, dots);
      std::copy(lanes, lanes + n_keys, row);
    }
  }
}

// queries[i].out[c0, c0 + 16) += sum_{p in [p0, p1)} scores[i][p] * v_p[c0, c0 + 16), or = when
// `first`, for NQ queries (scores rows s_stride apart).
template <int NQ, typename T>
void weighted_values(const float* scores, int s_stride, const T* v, int kv_stride, int p0, int p1,
                     int c0, const AttentionQuery* queries, bool first) {
  __m256 acc[NQ][2];
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < 2; ++c) {
      acc[i][c] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(queries[i].out + c0 + 8 * c);
    }
  }
  v += c0;
  for (int p = p0; p < p1; ++p, v += kv_stride) {
    const __m256 v0 = load8(v), v1 = load8(v + 8);
    for (int i = 0; i < NQ; ++i) {
      const __m256 w = _mm256_broadcast_ss(scores + i * s_stride + p);
      acc[i][0] = _mm256_fmadd_ps(w, v0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(w, v1, acc[i][1]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < 2; ++c) _mm256_storeu_ps(queries[i].out + c0 + 8 * c, acc[i][c]);
  }
}
#endif

#if defined(K25_ATTN_BLOCKED)
// Keys are visited in tiles of at most this many positions (inside one span): a tile's rows stay
// in L1 while every block of 4 queries uses them.
constexpr int kKeyTile = 64;

// Asks for rows [0, n) of a span (head_dim elements each, kv_stride apart) to be brought into
// cache, one 64-byte line at a time.
template <typename T>
void prefetch_rows(const T* rows, int n, int kv_stride, int head_dim) {
  const size_t row_bytes = static_cast<size_t>(head_dim) * sizeof(T);
  for (int r = 0; r < n; ++r) {
    const char* row = reinterpret_cast<const char*>(rows + static_cast<size_t>(r) * kv_stride);
    for (size_t b = 0; b < row_bytes; b += 64) _mm_prefetch(row + b, _MM_HINT_T0);
  }
}

// Spans ahead whose rows are prefetched (see for_each_tile).
constexpr int kPrefetchSpans = 2;

// Calls tile(first_position, keys, values, offset, n) for consecutive tiles covering positions
// [0, n). The spans are the KV pool's pages: 16 rows of a head, scattered in memory, too short
// for the hardware prefetcher, and in decode nearly every row comes from DRAM (the loads of the
// first keys were a third of decode attention's samples). So the keys (or values) of the spans
// kPrefetchSpans ahead are prefetched while the current one runs.
template <typename T, typename Fn>
void for_each_tile(const KvSpan* spans, int n_spans, int n, bool values, int kv_stride,
                   int head_dim, Fn&& tile) {
  int span_start = 0;
  int ahead = 0, ahead_start = 0;  // the next span to prefetch and its first position
  for (int s = 0; s < n_spans && span_start < n; ++s) {
    const int stop = std::min(n, span_start + spans[s].n);
    for (; ahead < n_spans && ahead <= s + kPrefetchSpans && ahead_start < n; ++ahead) {
      const KvSpan& next = spans[ahead];
      const int rows = std::min({next.n, n - ahead_start, kKeyTile});
      prefetch_rows(static_cast<const T*>(values ? next.values : next.keys), rows, kv_stride,
                    head_dim);
      ahead_start += next.n;
    }
    for (int p = span_start; p < stop; p += kKeyTile) {
      tile(p, static_cast<const T*>(spans[s].keys), static_cast<const T*>(spans[s].values),
           static_cast<size_t>(p - span_start), std::min(kKeyTile, stop - p));
    }
    span_start = stop;
  }
}

// Calls fn(std::integral_constant<int, n>{}) for 1 <= n <= Max: kernels take their query count
// as a template argument so a call of fewer queries computes only those.
template <int Max, typename Fn>
void with_count(int n, Fn&& fn) {
  if constexpr (Max > 1) {
    if (n < Max) {
      with_count<Max - 1>(n, fn);
      return;
    }
  }
  fn(std::integral_constant<int, Max>{});
}

// Every query, tile by tile: scores (causal per block), exp per query over its window, then the
// values, divided by the exp sum at the end. Scores take blocks of up to kQueries queries, the
// values groups of up to kValueQueries. Each score and each output element is computed by the
// same operations in the same order whatever the other queries of the call are, so results do
// not depend on how a batch groups its queries.
// Flattened: GCC's inlining budget for this file gave the F16 instantiation (k25-server's default
// cache) less of its kernels inlined than the F32 one (102 against 138 multiply-adds in its code
// on the avx2 set), 10-14% slower (kernels_bench BM_AttendPaged); changes that added an
// instantiation moved that loss onto the F32 one.
template <typename T>
[[gnu::flatten]] void attend_blocked(const AttentionQuery* queries, int nq, const KvSpan* spans,
                                     int n_spans, int kv_stride, int head_dim, float scale,
                                     std::vector<float>& scratch) {
  const int n_blocks = (nq + kQueries - 1) / kQueries;
  const int n_groups = (nq + kValueQueries - 1) / kValueQueries;
  int n = 0;
  for (int i = 0; i < nq; ++i) n = std::max(n, queries[i].n_pos);
  const int s_stride = n;
  scratch.resize(static_cast<size_t>(nq) * s_stride);
  float* scores = scratch.data();
  std::vector<int> limit(n_blocks, 0), group_limit(n_groups, 0);
  for (int i = 0; i < nq; ++i) {
    limit[i / kQueries] = std::max(limit[i / kQueries], queries[i].n_pos);
    group_limit[i / kValueQueries] = std::max(group_limit[i / kValueQueries], queries[i].n_pos);
  }
  const auto score_row = [&](int i) { return scores + static_cast<size_t>(i) * s_stride; };

  for_each_tile<T>(spans, n_spans, n, false, kv_stride, head_dim,
                   [&](int p0, const T* k0, const T*, size_t offset, int len) {
                     for (int b = 0; b < n_blocks; ++b) {
                       with_count<kQueries>(std::min(kQueries, nq - b * kQueries), [&](auto block) {
                         const int stop = std::min(p0 + len, limit[b]);
                         const T* k = k0 + offset * kv_stride;
                         for (int p = p0; p < stop; p += kKeys, k += kKeys * kv_stride) {
                           dots_block<decltype(block)::value>(&queries[b * kQueries], k, kv_stride,
                                                              std::min(kKeys, stop - p), head_dim,
                                                              scale, score_row(b * kQueries) + p,
                                                              s_stride, p + kKeys <= s_stride);
                         }
                       });
                     }
                   });
  std::vector<float> inv_sum(nq);  // softmax's division, applied to the outputs at the end
  for (int i = 0; i < nq; ++i) {
    float* row = score_row(i);
    const AttentionQuery& query = queries[i];
    inv_sum[i] = normalise_probabilities<T>(row, query.first, query.n_pos, query.stats);
    // Positions outside the query's window weigh nothing (adding 0 * v leaves a sum unchanged)
    // up to the last position its value group reads.
    std::fill(row, row + query.first, 0.0f);
    std::fill(row + query.n_pos, row + group_limit[i / kValueQueries], 0.0f);
  }
  for_each_tile<T>(
      spans, n_spans, n, true, kv_stride, head_dim,
      [&](int p0, const T*, const T* v0, size_t offset, int len) {
        for (int g = 0; g < n_groups; ++g) {
          const int stop = std::min(p0 + len, group_limit[g]);
          if (stop <= p0) continue;
          const T* v = v0 + offset * kv_stride;
          const int first = g * kValueQueries;
          with_count<kValueQueries>(std::min(kValueQueries, nq - first), [&](auto group) {
            for (int c0 = 0; c0 < head_dim; c0 += kValueCols) {
              weighted_values<decltype(group)::value>(score_row(first), s_stride, v, kv_stride, p0,
                                                      stop, c0, &queries[first], p0 == 0);
            }
          });
        }
      });
  for (int i = 0; i < nq; ++i) {
    for (int d = 0; d < head_dim; ++d) queries[i].out[d] *= inv_sum[i];
  }
}
#endif  // K25_ATTN_BLOCKED

template <typename T>
void attend(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
            int kv_stride, int head_dim, float scale, std::vector<float>& scores) {
#if defined(K25_ATTN_BLOCKED)
  if (head_dim % kValueCols == 0) {
    attend_blocked<T>(queries, n_queries, spans, n_spans, kv_stride, head_dim, scale, scores);
    return;
  }
#endif
#if defined(__AVX2__)
  if (is_narrow_head(head_dim)) {
    switch (head_dim / 8) {
      case 1:
        attend_narrow<T, 1>(queries, n_queries, spans, n_spans, kv_stride, scale, scores);
        break;
      case 2:
        attend_narrow<T, 2>(queries, n_queries, spans, n_spans, kv_stride, scale, scores);
        break;
      default:
        attend_narrow<T, 3>(queries, n_queries, spans, n_spans, kv_stride, scale, scores);
        break;
    }
    return;
  }
#endif
  int n = 0;
  for (int i = 0; i < n_queries; ++i) n = std::max(n, queries[i].n_pos);
  scores.resize(static_cast<size_t>(n) + head_dim);  // the scores, then one widened row
  for (int i = 0; i < n_queries; ++i) {
    attend_one<T>(queries[i], spans, n_spans, kv_stride, head_dim, scale, scores.data(),
                  scores.data() + n);
  }
}

}  // namespace

void attend_queries(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, float scale, std::vector<float>& scores,
                    KvDtype dtype) {
  if (dtype == KvDtype::kF16) {
    // The queries rounded to F16 too, as llama.cpp's F16 products with the cached keys take them.
    thread_local std::vector<float> rounded;
    thread_local std::vector<AttentionQuery> rounded_queries;
    rounded.resize(static_cast<size_t>(n_queries) * head_dim);
    rounded_queries.assign(queries, queries + n_queries);
    for (int i = 0; i < n_queries; ++i) {
      float* q = rounded.data() + static_cast<size_t>(i) * head_dim;
      for (int d = 0; d < head_dim; ++d) q[d] = round_to_f16(queries[i].q[d]);
      rounded_queries[i].q = q;
    }
    attend<Half>(rounded_queries.data(), n_queries, spans, n_spans, kv_stride, head_dim, scale,
                 scores);
  } else {
    attend<float>(queries, n_queries, spans, n_spans, kv_stride, head_dim, scale, scores);
  }
}

}  // namespace k25::K25_KERNEL_SET
