// Element-wise kernels. dot_f32 and axpy carry attention over long contexts, so they use several
// independent accumulators; softmax and silu use a vector exp (relative error below 2e-6,
// checked by the tests) in the AVX2 path.
#include "kernels/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/quant.h"
#include "kernels/set/float_sums.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {
namespace {

#if defined(__AVX2__)
[[maybe_unused]] inline float hmax(__m256 v) {  // used without AVX-512 only
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// e^r for r = x - n ln2 (Cody-Waite split of ln2, |r| <= ln2/2): a degree-6 polynomial.
inline __m256 exp8_reduced(__m256 x, __m256 n) {
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
}

inline __m256 round_log2e8(__m256 x) {
  return _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// exp(x) for 8 floats: x = n ln2 + r, e^r by exp8_reduced, and 2^n built in the exponent bits.
// Inputs below -87.3 give 0, above 88.7 give +inf, like expf.
inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228f);
  const __m256 lo = _mm256_set1_ps(-87.3365f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = round_log2e8(xc);
  const __m256 p = exp8_reduced(xc, n);
  // 2^n for n in [-126, 128]: split into two factors so n = 128 and n = -126 stay in range.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  result = _mm256_andnot_ps(underflow, result);
  return _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), overflow);
}

// exp8 for x <= 0, as softmax takes it (x - max; a larger x, possible only beside a NaN, is taken
// as 0), a sixth of attention's time at long context. The same result as exp8 for every such x,
// NaN included (both give exp(-87.3365)): nothing overflows, and n is in [-126, 0], so 2^n is one
// factor (exp8's first multiply by a normal power of two is exact, and both round p * 2^n once).
inline __m256 exp8_nonpositive(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_setzero_ps());
  const __m256 n = round_log2e8(xc);
  const __m256 p = exp8_reduced(xc, n);
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}
#endif

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source, which
// -Wuninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// exp8_nonpositive's method for 16 floats.
inline __m512 exp16_nonpositive(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_setzero_ps());
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(~underflow, p, _mm512_castsi512_ps(bits));
}
#endif

}  // namespace

float exp_minus_max(float* x, int n) {
  int i = 0;
  float max = x[0];
#if defined(__AVX512F__)
  if (n >= 16) {
    __m512 m = _mm512_loadu_ps(x);
    for (i = 16; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    max = _mm512_reduce_max_ps(m);
  }
  for (; i < n; ++i) max = std::fmax(max, x[i]);
  const __m512 vmax = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (i < n) {  // the tail through masked lanes, so every element takes the same exp
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), vmax));
    _mm512_mask_storeu_ps(x + i, tail, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(tail, e));
  }
  return _mm512_reduce_add_ps(vsum);
#else
#if defined(__AVX2__)
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    max = hmax(m);
  }
#endif
  for (; i < n; ++i) max = std::fmax(max, x[i]);
  float sum = 0.0f;
  i = 0;
#if defined(__AVX2__)
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  sum = hsum(vsum);
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
#endif
}

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  int i = 0;
  float sum = 0.0f;
#if defined(__AVX2__)
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  sum = hsum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  i = 0;
#if defined(__AVX2__)
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s),
                                            _mm256_loadu_ps(weight + i)));
  }
#endif
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  const float inv = 1.0f / exp_minus_max(x, n);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(float* a, const float* b, int n) {
  int i = 0;
#if defined(__AVX2__)
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const auto silu_mul8 = [&](const float* x, const float* y, float* out) {
    const __m256 v = _mm256_loadu_ps(x);
    const __m256 e = exp8(_mm256_xor_ps(v, sign));
    const __m256 silu = _mm256_div_ps(v, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out, _mm256_mul_ps(silu, _mm256_loadu_ps(y)));
  };
  for (; i + 8 <= n; i += 8) silu_mul8(a + i, b + i, a + i);
  if (i < n) {
    // The tail through the same vector code, so an element's result does not depend on where
    // it falls (the FFN of a batch is one flat array: a token's last elements are a tail alone
    // and not in a batch).
    float x[8] = {}, y[8] = {}, out[8];
    std::copy(a + i, a + n, x);
    std::copy(b + i, b + n, y);
    silu_mul8(x, y, out);
    std::copy(out, out + (n - i), a + i);
  }
#else
  for (; i < n; ++i) a[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
#endif
}

void gelu_f16_mul(float* a, const float* b, int n) {
  // gelu of every F16 value, as F16 bits.
  static const std::unique_ptr<std::array<uint16_t, 65536>> table = [] {
    auto t = std::make_unique<std::array<uint16_t, 65536>>();
    for (uint32_t h = 0; h < t->size(); ++h) {
      const float x = half_to_float(static_cast<uint16_t>(h));
      const float tanh_arg = 0.7978845608028654f * x * (1.0f + 0.044715f * x * x);
      (*t)[h] = float_to_half(0.5f * x * (1.0f + std::tanh(tanh_arg)));
    }
    return t;
  }();
  for (int i = 0; i < n; ++i) {
    const float x = a[i];
    const float gelu = x <= -10.0f  ? 0.0f
                       : x >= 10.0f ? x
                                    : half_to_float((*table)[float_to_half(x)]);
    a[i] = gelu * b[i];
  }
}

void add_inplace(float* a, const float* b, int n) {
  int i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
#endif
  for (; i < n; ++i) a[i] += b[i];
}

float dot_f32(const float* a, const float* b, int n) {
  int i = 0;
  float sum = 0.0f;
#if defined(__AVX2__)
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
#elif defined(__SSE3__)
  // The scalar set on x86 (no FMA): four vectors of partial sums, as above at half the width.
  __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 4; ++k) {
      acc[k] =
          _mm_add_ps(acc[k], _mm_mul_ps(_mm_loadu_ps(a + i + 4 * k), _mm_loadu_ps(b + i + 4 * k)));
    }
  }
  for (; i + 4 <= n; i += 4) {
    acc[0] = _mm_add_ps(acc[0], _mm_mul_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
  }
  sum = hsum(_mm_add_ps(_mm_add_ps(acc[0], acc[1]), _mm_add_ps(acc[2], acc[3])));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void axpy(float* a, float s, const float* b, int n) {
  int i = 0;
#if defined(__AVX2__)
  const __m256 vs = _mm256_set1_ps(s);
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(b + i), _mm256_loadu_ps(a + i)));
    _mm256_storeu_ps(a + i + 8,
                     _mm256_fmadd_ps(vs, _mm256_loadu_ps(b + i + 8), _mm256_loadu_ps(a + i + 8)));
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(b + i), _mm256_loadu_ps(a + i)));
  }
#endif
  for (; i < n; ++i) a[i] += s * b[i];
}

}  // namespace k25::K25_KERNEL_SET
