// Attention for a block of queries on one KV head, GEMM-like: scores for 4 queries x 4 keys are
// accumulated in registers (each key and query chunk loaded once for 4 products), softmax runs
// per query, then the values are summed with the outputs of 4 queries in registers, so each
// cached row is read once per 4 queries instead of once per query. Needs AVX-512 and a head size
// that is a multiple of 64; otherwise each query runs dot_f32 / softmax / axpy on its own.
#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/ops.h"

namespace k25 {
namespace {

// Each query separately: the portable path.
void attend_one(const AttentionQuery& query, const KvSpan* spans, int n_spans, int kv_stride,
                int head_dim, float scale, float* scores) {
  int p = 0;
  for (int s = 0; s < n_spans && p < query.n_pos; ++s) {
    const int stop = std::min(query.n_pos, p + spans[s].n);
    const float* keys = spans[s].keys;
    for (; p < stop; ++p, keys += kv_stride) scores[p] = dot_f32(query.q, keys, head_dim) * scale;
  }
  softmax(scores, query.n_pos);
  std::fill(query.out, query.out + head_dim, 0.0f);
  p = 0;
  for (int s = 0; s < n_spans && p < query.n_pos; ++s) {
    const int stop = std::min(query.n_pos, p + spans[s].n);
    const float* values = spans[s].values;
    for (; p < stop; ++p, values += kv_stride) axpy(query.out, scores[p], values, head_dim);
  }
}

#if defined(__AVX512F__)
#define K25_ATTN_BLOCKED 1
// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source, which
// -Wuninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

constexpr int kQueries = 4;
constexpr int kKeys = 4;

// The two 256-bit halves of v added.
inline __m256 upper_plus_lower(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xee)));
}

inline float hsum(__m512 v) {
  const __m256 y = upper_plus_lower(v);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Dots of 4 queries (q[i]) with 4 keys at k, k + stride, ...: scores[i * s_stride + j].
void dots_4x4(const float* const* q, const float* k, int stride, int head_dim, float scale,
              float* scores, int s_stride) {
  __m512 acc[kQueries][kKeys];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  for (int c = 0; c < head_dim; c += 16) {
    __m512 kv[kKeys];
    for (int j = 0; j < kKeys; ++j) kv[j] = _mm512_loadu_ps(k + j * stride + c);
    for (int i = 0; i < kQueries; ++i) {
      const __m512 qv = _mm512_loadu_ps(q[i] + c);
      for (int j = 0; j < kKeys; ++j) acc[i][j] = _mm512_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  const __m128 vscale = _mm_set1_ps(scale);
  for (int i = 0; i < kQueries; ++i) {
    __m256 y[kKeys];
    for (int j = 0; j < kKeys; ++j) {
      y[j] = upper_plus_lower(acc[i][j]);
    }
    // Per 128-bit lane: [sum y0, sum y1, sum y2, sum y3] over that lane's four elements.
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(y[0], y[1]), _mm256_hadd_ps(y[2], y[3]));
    const __m128 dots = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(scores + i * s_stride, _mm_mul_ps(dots, vscale));
  }
}

// Dots of 4 queries with the single key k.
void dots_4x1(const float* const* q, const float* k, int head_dim, float scale, float* scores,
              int s_stride) {
  __m512 acc[kQueries];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int c = 0; c < head_dim; c += 16) {
    const __m512 kv = _mm512_loadu_ps(k + c);
    for (int i = 0; i < kQueries; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q[i] + c), kv, acc[i]);
  }
  for (int i = 0; i < kQueries; ++i) scores[i * s_stride] = hsum(acc[i]) * scale;
}

// out[i][c0, c0 + 64) = sum_p scores[i][p] * v_p[c0, c0 + 64) for p < n (scores past a query's
// own n_pos are zero).
void weighted_values_4x64(const float* scores, int s_stride, const KvSpan* spans, int n_spans,
                          int kv_stride, int n, int c0, float* const* out) {
  __m512 acc[kQueries][4];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  int p = 0;
  for (int s = 0; s < n_spans && p < n; ++s) {
    const int stop = std::min(n, p + spans[s].n);
    const float* v = spans[s].values + c0;
    for (; p < stop; ++p, v += kv_stride) {
      __m512 vv[4];
      for (int c = 0; c < 4; ++c) vv[c] = _mm512_loadu_ps(v + 16 * c);
      for (int i = 0; i < kQueries; ++i) {
        const __m512 w = _mm512_set1_ps(scores[i * s_stride + p]);
        for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_fmadd_ps(w, vv[c], acc[i][c]);
      }
    }
  }
  for (int i = 0; i < kQueries; ++i) {
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out[i] + c0 + 16 * c, acc[i][c]);
  }
}

// Up to 4 queries; missing ones repeat query 0 into a scratch output.
void attend_block(const AttentionQuery* queries, int nq, const KvSpan* spans, int n_spans,
                  int kv_stride, int head_dim, float scale, std::vector<float>& scratch) {
  int n = 0;
  for (int i = 0; i < nq; ++i) n = std::max(n, queries[i].n_pos);
  const int s_stride = n;
  scratch.resize(static_cast<size_t>(kQueries) * s_stride + head_dim);
  float* scores = scratch.data();
  float* discard = scores + kQueries * s_stride;
  const float* q[kQueries];
  float* out[kQueries];
  for (int i = 0; i < kQueries; ++i) {
    q[i] = queries[i < nq ? i : 0].q;
    out[i] = i < nq ? queries[i].out : discard;
  }
  int p = 0;
  for (int s = 0; s < n_spans && p < n; ++s) {
    const int stop = std::min(n, p + spans[s].n);
    const float* k = spans[s].keys;
    for (; p + kKeys <= stop; p += kKeys, k += kKeys * kv_stride) {
      dots_4x4(q, k, kv_stride, head_dim, scale, scores + p, s_stride);
    }
    for (; p < stop; ++p, k += kv_stride) dots_4x1(q, k, head_dim, scale, scores + p, s_stride);
  }
  for (int i = 0; i < kQueries; ++i) {
    float* row = scores + i * s_stride;
    const int n_pos = i < nq ? queries[i].n_pos : n;
    softmax(row, n_pos);
    std::fill(row + n_pos, row + n, 0.0f);
  }
  for (int c0 = 0; c0 < head_dim; c0 += 64) {
    weighted_values_4x64(scores, s_stride, spans, n_spans, kv_stride, n, c0, out);
  }
}
#endif  // __AVX512F__

}  // namespace

void attend_queries(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, float scale, std::vector<float>& scores) {
#if defined(K25_ATTN_BLOCKED)
  if (head_dim % 64 == 0) {
    for (int i = 0; i < n_queries; i += kQueries) {
      attend_block(queries + i, std::min(kQueries, n_queries - i), spans, n_spans, kv_stride,
                   head_dim, scale, scores);
    }
    return;
  }
#endif
  int n = 0;
  for (int i = 0; i < n_queries; ++i) n = std::max(n, queries[i].n_pos);
  scores.resize(n);
  for (int i = 0; i < n_queries; ++i) {
    attend_one(queries[i], spans, n_spans, kv_stride, head_dim, scale, scores.data());
  }
}

}  // namespace k25
