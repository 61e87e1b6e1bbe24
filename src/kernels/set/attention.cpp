// Attention for the queries that share one KV head, GEMM-like. Scores: the keys are stored in
// tiles (kernels/kv_dtype.h), element d of 16 positions together, so a block of queries gets a
// whole tile's scores from head_dim multiply-adds per query with its elements broadcast, each
// tile loaded once for the block and no sums across vector lanes. Exponentials run per query.
// Values: the outputs of several queries are summed in registers over the value rows, which are
// visited in tiles of up to 64 positions so that every query group uses a tile while it is in
// L1: a prefill task of many queries reads the cached rows from memory once. Needs AVX-512 and a
// head size that is a multiple of 64, or AVX2 and a multiple of 16; heads of 8, 16 or 24
// elements take the narrow path (narrow_values); otherwise each query sums its values with axpy.
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

// a * b + c as the vector paths compute it: one rounding where the target has FMA (aarch64
// always has; GCC would fuse a plain a * b + c there at -O2 but not at -O1, so it is explicit).
// An x86 target without FMA rounds the product and the sum separately.
inline float mul_add(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

inline float widen(float x) {
  return x;
}
inline float widen(Half h) {
  return half_to_float(h);
}

// The scaled score of every position of [first, n_pos) of each query, from key tiles of any
// width, one position at a time: the portable path, which computes what the vector tiles compute
// for each of their lanes.
template <typename T>
void scores_any_tiles(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                      int kv_stride, int head_dim, float scale, float* scores, size_t s_stride) {
  for (int i = 0; i < nq; ++i) {
    const AttentionQuery& query = queries[i];
    float* row = scores + i * s_stride;
    int span_start = 0;
    for (int s = 0; s < n_spans && span_start < query.n_pos; span_start += spans[s].n, ++s) {
      const int begin = std::max(query.first, span_start);
      const int end = std::min(query.n_pos, span_start + spans[s].n);
      const int w = spans[s].key_tile;
      const T* keys = static_cast<const T*>(spans[s].keys);
      for (int p = begin; p < end; ++p) {
        const int j = p - span_start;
        const T* k = keys + static_cast<size_t>(j / w) * kv_stride * w + j % w;
        float sum = query.q[0] * widen(k[0]);
        for (int d = 1; d < head_dim; ++d) {
          sum = mul_add(query.q[d], widen(k[static_cast<size_t>(d) * w]), sum);
        }
        row[p] = sum * scale;
      }
    }
  }
}

// out = sum_p probability_p v_p, then times inv_sum, for one query: the portable path. `row` is
// scratch for one widened value row.
template <typename T>
void values_one(const AttentionQuery& query, const KvSpan* spans, int n_spans, int kv_stride,
                int head_dim, const float* probabilities, float inv_sum, float* row) {
  std::fill(query.out, query.out + head_dim, 0.0f);
  for_each_row<T>(spans, n_spans, query.first, query.n_pos, true, kv_stride,
                  [&](int p, const T* value) {
                    axpy(query.out, probabilities[p], as_floats(value, head_dim, row), head_dim);
                  });
  if (inv_sum != 1.0f) {
    for (int d = 0; d < head_dim; ++d) query.out[d] *= inv_sum;
  }
}

#if defined(__AVX2__)
// Heads of 8, 16 or 24 elements (stories260K's are 8) are too narrow for the blocked kernels, and
// an axpy call per position cost more than its arithmetic (83% of stories260K's decode). Here
// the values of up to kNarrowGroup queries are summed in registers in one pass over the rows, so
// the queries of a verify step or a GQA group share it. An output element is axpy's fused
// multiply-adds in position order, which does not depend on the other queries or the spans.
constexpr int kNarrowGroup = 4;

inline bool is_narrow_head(int head_dim) {
  return head_dim % 8 == 0 && head_dim < 32;
}

// 8 consecutive elements as floats.
inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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

// The values of every query, kNarrowGroup at a time (C vectors of 8 elements per output).
template <typename T, int C>
void narrow_values_all(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                       int kv_stride, const float* scores, size_t s_stride, const float* inv_sum) {
  for (int g0 = 0; g0 < nq; g0 += kNarrowGroup) {
    const int group = std::min(kNarrowGroup, nq - g0);
    const float* rows[kNarrowGroup];
    for (int g = 0; g < group; ++g) rows[g] = scores + (g0 + g) * s_stride;
    const AttentionQuery* q = queries + g0;
    switch (group) {
      case 1:
        narrow_values<T, C, 1>(q, spans, n_spans, kv_stride, rows, inv_sum + g0);
        break;
      case 2:
        narrow_values<T, C, 2>(q, spans, n_spans, kv_stride, rows, inv_sum + g0);
        break;
      case 3:
        narrow_values<T, C, 3>(q, spans, n_spans, kv_stride, rows, inv_sum + g0);
        break;
      default:
        narrow_values<T, C, 4>(q, spans, n_spans, kv_stride, rows, inv_sum + g0);
        break;
    }
  }
}
#endif  // __AVX2__

#if defined(__AVX512F__)
#define K25_ATTN_BLOCKED 1

// Scores: blocks of up to kScoreQueries queries over score_tiles(n) key tiles (one vector each):
// 16 accumulators, each broadcast element of a query used for every tile. A score is a chain of
// head_dim dependent multiply-adds, so a block needs 8 or more chains to keep both FMA pipes busy:
// fewer queries (a decode step's GQA group) take more tiles.
constexpr int kScoreQueries = 8;
constexpr int score_tiles(int n_queries) {
  return n_queries <= 4 ? 4 : 2;
}
constexpr int kValueCols = 64;    // output columns per weighted_values call
constexpr int kValueQueries = 4;  // 16 accumulators already; no wider call

// 16 consecutive elements as floats.
inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Scaled scores of NQ queries (q[i]) at the 16 positions of each of NT key tiles of width 16
// (tiles[t], at the head's elements): out[i] + 16 * t. Lane j of a tile's accumulator is
// q[0] k_j[0], then fused multiply-adds over d, as scores_any_tiles computes it.
template <int NQ, int NT, typename T>
inline void tile_scores(const float* const* q, const T* const* tiles, int head_dim, float scale,
                        float* const* out) {
  __m512 acc[NQ][NT];
  for (int t = 0; t < NT; ++t) {
    const __m512 k = load16(tiles[t]);
    for (int i = 0; i < NQ; ++i) acc[i][t] = _mm512_mul_ps(_mm512_set1_ps(q[i][0]), k);
  }
  for (int d = 1; d < head_dim; ++d) {
    __m512 k[NT];
    for (int t = 0; t < NT; ++t) k[t] = load16(tiles[t] + 16 * d);
    for (int i = 0; i < NQ; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i][d]);
      for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_fmadd_ps(qd, k[t], acc[i][t]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int i = 0; i < NQ; ++i) {
    for (int t = 0; t < NT; ++t)
      _mm512_storeu_ps(out[i] + 16 * t, _mm512_mul_ps(acc[i][t], vscale));
  }
}

// queries[i].out[c0, c0 + 64) += sum_{p in [p0, p1)} scores[i][p] * v_p[c0, c0 + 64), or = when
// `first`, for NQ queries (scores rows s_stride apart).
template <int NQ, typename T>
void weighted_values(const float* scores, size_t s_stride, const T* v, int kv_stride, int p0,
                     int p1, int c0, const AttentionQuery* queries, bool first) {
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
// Scores: 6 queries over one key tile of 16 (two vectors): 12 accumulators, two key vectors and a
// broadcast fill the 16 ymm registers. A score is a chain of head_dim dependent multiply-adds, so
// a block needs 8 or more chains to keep both FMA pipes busy: fewer queries (a decode step's GQA
// group) take more tiles.
constexpr int kScoreQueries = 6;
constexpr int score_tiles(int n_queries) {
  return n_queries == 1 ? 4 : n_queries <= 3 ? 2 : 1;
}
constexpr int kValueCols = 16;  // 2 vectors of output columns per query
// 12 accumulators, 2 value vectors and a broadcast probability fill the registers, 8 loads per
// 12 multiply-adds (4 queries: 6 per 8; 2 or 3 queries of 4 vectors were 10-25% slower).
constexpr int kValueQueries = 6;

// Scaled scores of NQ queries (q[i]) at the 16 positions of each of NT key tiles of width 16
// (tiles[t], at the head's elements; two vectors each): out[i] + 16 * t. Lane j of a tile is
// q[0] k_j[0], then fused multiply-adds over d, as scores_any_tiles computes it.
template <int NQ, int NT, typename T>
inline void tile_scores(const float* const* q, const T* const* tiles, int head_dim, float scale,
                        float* const* out) {
  constexpr int NV = 2 * NT;  // key vectors per element d
  __m256 acc[NQ][NV];
  {
    __m256 k[NV];
    for (int v = 0; v < NV; ++v) k[v] = load8(tiles[v / 2] + 8 * (v % 2));
    for (int i = 0; i < NQ; ++i) {
      const __m256 q0 = _mm256_set1_ps(q[i][0]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_mul_ps(q0, k[v]);
    }
  }
  for (int d = 1; d < head_dim; ++d) {
    __m256 k[NV];
    for (int v = 0; v < NV; ++v) k[v] = load8(tiles[v / 2] + 16 * d + 8 * (v % 2));
    for (int i = 0; i < NQ; ++i) {
      const __m256 qd = _mm256_broadcast_ss(q[i] + d);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(qd, k[v], acc[i][v]);
    }
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int i = 0; i < NQ; ++i) {
    for (int v = 0; v < NV; ++v) {
      _mm256_storeu_ps(out[i] + 8 * v, _mm256_mul_ps(acc[i][v], vscale));
    }
  }
}

// queries[i].out[c0, c0 + 16) += sum_{p in [p0, p1)} scores[i][p] * v_p[c0, c0 + 16), or = when
// `first`, for NQ queries (scores rows s_stride apart).
template <int NQ, typename T>
void weighted_values(const float* scores, size_t s_stride, const T* v, int kv_stride, int p0,
                     int p1, int c0, const AttentionQuery* queries, bool first) {
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
// Value rows are visited in tiles of at most this many positions (inside one span): a tile's rows
// stay in L1 while every query group uses them. Scores visit key tiles in groups of as many
// positions, for the same reason.
constexpr int kRowTile = 64;

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

// The same for a key tile of 16 positions (16 * head_dim contiguous elements).
template <typename T>
void prefetch_tile(const T* tile, int head_dim) {
  const char* bytes = reinterpret_cast<const char*>(tile);
  const size_t n = static_cast<size_t>(head_dim) * kKeyTile * sizeof(T);
  for (size_t b = 0; b < n; b += 64) _mm_prefetch(bytes + b, _MM_HINT_T0);
}

// Spans ahead whose rows are prefetched (see for_each_value_tile).
constexpr int kPrefetchSpans = 2;

// Calls tile(first_position, values, offset, n) for consecutive value tiles covering positions
// [0, n). The spans are the KV pool's pages: 16 rows of a head, scattered in memory, too short
// for the hardware prefetcher, and in decode nearly every row comes from DRAM (the loads of the
// first rows were a third of decode attention's samples). So the values of the spans
// kPrefetchSpans ahead are prefetched while the current one runs.
template <typename T, typename Fn>
void for_each_value_tile(const KvSpan* spans, int n_spans, int n, int kv_stride, int head_dim,
                         Fn&& tile) {
  int span_start = 0;
  int ahead = 0, ahead_start = 0;  // the next span to prefetch and its first position
  for (int s = 0; s < n_spans && span_start < n; ++s) {
    const int stop = std::min(n, span_start + spans[s].n);
    for (; ahead < n_spans && ahead <= s + kPrefetchSpans && ahead_start < n; ++ahead) {
      const KvSpan& next = spans[ahead];
      const int rows = std::min({next.n, n - ahead_start, kRowTile});
      prefetch_rows(static_cast<const T*>(next.values), rows, kv_stride, head_dim);
      ahead_start += next.n;
    }
    for (int p = span_start; p < stop; p += kRowTile) {
      tile(p, static_cast<const T*>(spans[s].values), static_cast<size_t>(p - span_start),
           std::min(kRowTile, stop - p));
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

// The key tiles of the first n positions, in order, when every span holds tiles of kKeyTile and
// every span but the last a whole number of them (what the caches give); false otherwise.
template <typename T>
bool key_tiles(const KvSpan* spans, int n_spans, int n, int kv_stride, std::vector<const T*>& out) {
  out.clear();
  int span_start = 0;
  for (int s = 0; s < n_spans && span_start < n; span_start += spans[s].n, ++s) {
    if (spans[s].key_tile != kKeyTile) return false;
    if (span_start + spans[s].n < n && spans[s].n % kKeyTile != 0) return false;
    const T* keys = static_cast<const T*>(spans[s].keys);
    for (int j = 0; j < spans[s].n && span_start + j < n; j += kKeyTile) {
      out.push_back(keys + static_cast<size_t>(j / kKeyTile) * kv_stride * kKeyTile);
    }
  }
  return true;
}

// The scaled scores of every query from whole key tiles (key_tiles()), scores row i at
// scores + i * s_stride (s_stride a multiple of kKeyTile: a tile's 16 scores are stored whole,
// outside the query's window too; those are never read). Blocks of kScoreQueries queries take
// the tiles a group of kRowTile positions at a time, each block only those up to its last
// position.
template <typename T>
void tiled_scores(const AttentionQuery* queries, int nq, const std::vector<const T*>& tiles,
                  int head_dim, float scale, float* scores, size_t s_stride) {
  const int n_blocks = (nq + kScoreQueries - 1) / kScoreQueries;
  std::vector<int> tile_begin(n_blocks, INT32_MAX), tile_end(n_blocks, 0);
  for (int i = 0; i < nq; ++i) {
    const int b = i / kScoreQueries;
    tile_begin[b] = std::min(tile_begin[b], queries[i].first / kKeyTile);
    tile_end[b] = std::max(tile_end[b], (queries[i].n_pos + kKeyTile - 1) / kKeyTile);
  }
  constexpr int kGroupTiles = kRowTile / kKeyTile;
  const int n_tiles = static_cast<int>(tiles.size());
  for (int g0 = 0; g0 < n_tiles; g0 += kGroupTiles) {
    const int g1 = std::min(n_tiles, g0 + kGroupTiles);
    for (int t = g1; t < std::min(n_tiles, g1 + kGroupTiles); ++t)
      prefetch_tile(tiles[t], head_dim);
    for (int b = 0; b < n_blocks; ++b) {
      const int first = b * kScoreQueries;
      const int t0 = std::max(g0, tile_begin[b]), t1 = std::min(g1, tile_end[b]);
      if (t0 >= t1) continue;
      with_count<kScoreQueries>(std::min(kScoreQueries, nq - first), [&](auto block) {
        constexpr int NQ = decltype(block)::value;
        const float* q[NQ];
        float* out[NQ];
        for (int i = 0; i < NQ; ++i) q[i] = queries[first + i].q;
        constexpr int NT = score_tiles(NQ);
        const auto run = [&](int t, auto n_tiles) {
          for (int i = 0; i < NQ; ++i) out[i] = scores + (first + i) * s_stride + t * kKeyTile;
          tile_scores<NQ, decltype(n_tiles)::value>(q, &tiles[t], head_dim, scale, out);
        };
        int t = t0;
        for (; t + NT <= t1; t += NT) run(t, std::integral_constant<int, NT>{});
        if constexpr (NT > 2) {
          for (; t + 2 <= t1; t += 2) run(t, std::integral_constant<int, 2>{});
        }
        if constexpr (NT > 1) {
          for (; t < t1; ++t) run(t, std::integral_constant<int, 1>{});
        }
      });
    }
  }
}

// The weighted values of every query (probabilities in its score row, zero outside its window up
// to its group's last position), groups of up to kValueQueries queries, tile by tile; then each
// output times its inv_sum.
template <typename T>
void blocked_values(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, const float* scores, size_t s_stride,
                    const int* group_limit, const float* inv_sum) {
  const int n_groups = (nq + kValueQueries - 1) / kValueQueries;
  int n = 0;
  for (int i = 0; i < nq; ++i) n = std::max(n, queries[i].n_pos);
  for_each_value_tile<T>(
      spans, n_spans, n, kv_stride, head_dim, [&](int p0, const T* v0, size_t offset, int len) {
        for (int g = 0; g < n_groups; ++g) {
          const int stop = std::min(p0 + len, group_limit[g]);
          if (stop <= p0) continue;
          const T* v = v0 + offset * kv_stride;
          const int first = g * kValueQueries;
          with_count<kValueQueries>(std::min(kValueQueries, nq - first), [&](auto group) {
            for (int c0 = 0; c0 < head_dim; c0 += kValueCols) {
              weighted_values<decltype(group)::value>(scores + first * s_stride, s_stride, v,
                                                      kv_stride, p0, stop, c0, &queries[first],
                                                      p0 == 0);
            }
          });
        }
      });
  for (int i = 0; i < nq; ++i) {
    for (int d = 0; d < head_dim; ++d) queries[i].out[d] *= inv_sum[i];
  }
}
#endif  // K25_ATTN_BLOCKED

// Every query: scores (from whole key tiles in vector registers where the caches give them, else
// position by position, the same bits either way), exp per query over its window, then the
// values, divided by the exp sum at the end. Each score and each output element is computed by
// the same operations in the same order whatever the other queries of the call are, so results
// do not depend on how a batch groups its queries.
// Flattened: GCC's inlining budget for this file gave the F16 instantiation (k25-server's default
// cache) less of its kernels inlined than the F32 one (102 against 138 multiply-adds in its code
// on the avx2 set), 10-14% slower (kernels_bench BM_AttendPaged); changes that added an
// instantiation moved that loss onto the F32 one.
template <typename T>
[[gnu::flatten]] void attend(const AttentionQuery* queries, int nq, const KvSpan* spans,
                             int n_spans, int kv_stride, int head_dim, float scale,
                             std::vector<float>& scratch) {
  int n = 0;
  for (int i = 0; i < nq; ++i) n = std::max(n, queries[i].n_pos);
  const size_t s_stride = (static_cast<size_t>(n) + kKeyTile - 1) / kKeyTile * kKeyTile;
  // The score rows, then one widened value row for the portable values.
  scratch.resize(static_cast<size_t>(nq) * s_stride + head_dim);
  float* scores = scratch.data();
#if defined(K25_ATTN_BLOCKED)
  thread_local std::vector<const T*> tiles;
  if (key_tiles<T>(spans, n_spans, n, kv_stride, tiles)) {
    tiled_scores<T>(queries, nq, tiles, head_dim, scale, scores, s_stride);
  } else {
    scores_any_tiles<T>(queries, nq, spans, n_spans, kv_stride, head_dim, scale, scores, s_stride);
  }
#else
  scores_any_tiles<T>(queries, nq, spans, n_spans, kv_stride, head_dim, scale, scores, s_stride);
#endif
  std::vector<float> inv_sum(nq);  // softmax's division, applied to the outputs at the end
  for (int i = 0; i < nq; ++i) {
    const AttentionQuery& query = queries[i];
    inv_sum[i] =
        normalise_probabilities<T>(scores + i * s_stride, query.first, query.n_pos, query.stats);
  }
#if defined(K25_ATTN_BLOCKED)
  if (head_dim % kValueCols == 0) {
    const int n_groups = (nq + kValueQueries - 1) / kValueQueries;
    std::vector<int> group_limit(n_groups, 0);
    for (int i = 0; i < nq; ++i) {
      group_limit[i / kValueQueries] = std::max(group_limit[i / kValueQueries], queries[i].n_pos);
    }
    for (int i = 0; i < nq; ++i) {
      // Positions outside the query's window weigh nothing (adding 0 * v leaves a sum
      // unchanged) up to the last position its value group reads.
      float* row = scores + i * s_stride;
      std::fill(row, row + queries[i].first, 0.0f);
      std::fill(row + queries[i].n_pos, row + group_limit[i / kValueQueries], 0.0f);
    }
    blocked_values<T>(queries, nq, spans, n_spans, kv_stride, head_dim, scores, s_stride,
                      group_limit.data(), inv_sum.data());
    return;
  }
#endif
#if defined(__AVX2__)
  if (is_narrow_head(head_dim)) {
    switch (head_dim / 8) {
      case 1:
        narrow_values_all<T, 1>(queries, nq, spans, n_spans, kv_stride, scores, s_stride,
                                inv_sum.data());
        break;
      case 2:
        narrow_values_all<T, 2>(queries, nq, spans, n_spans, kv_stride, scores, s_stride,
                                inv_sum.data());
        break;
      default:
        narrow_values_all<T, 3>(queries, nq, spans, n_spans, kv_stride, scores, s_stride,
                                inv_sum.data());
        break;
    }
    return;
  }
#endif
  float* row = scores + static_cast<size_t>(nq) * s_stride;
  for (int i = 0; i < nq; ++i) {
    values_one<T>(queries[i], spans, n_spans, kv_stride, head_dim, scores + i * s_stride,
                  inv_sum[i], row);
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
