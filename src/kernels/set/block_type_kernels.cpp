// The activation quantisers and the lookup of a block type's kernels, per kernel set.
#include "kernels/block_types.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/quant.h"
#include "kernels/set/block_types_portable.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {
namespace {

// Round to nearest, ties to even, as llama.cpp's nearest_int does for the K-quant activations.
inline int nearest_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// llama.cpp's x86 activation quantiser (its AVX2 quantize_row_q8_0 / q8_1): q = x * (127 / amax)
// rounded half to even, d = amax / 127. (The GGUF reference encoder of Q8_0 weights divides by d
// and rounds half away from zero instead.) Returns d.
float quantize_act_block(const float* x, int8_t* q) {
#if defined(__AVX2__)
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax8 = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax8 = _mm256_max_ps(amax8, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float amax = _mm_cvtss_f32(m);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) {
    qi[i] = _mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // The packs work per 128-bit lane; the permutation restores element order.
  const __m256i p8 =
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(nearest_int(x[j] * id));
#endif
  return amax / 127.0f;
}

void quantize_q8_0_acts(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    y[b].d = float_to_half(quantize_act_block(x + 32 * b, y[b].qs));
  }
}

void quantize_q8_1_acts(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = quantize_act_block(x + 32 * b, y[b].qs);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += y[b].qs[j];
    y[b].d = float_to_half(d);
    y[b].s = float_to_half(d * static_cast<float>(sum));
  }
}

// The scale comes from the element of largest magnitude, signed (the first one if several),
// so that element maps to exactly -127 (llama.cpp's quantize_row_q8_K); q rounds half to even.
// Returns false, leaving y untouched, when every element is 0 (or NaN).
#if defined(__AVX2__)
// AVX2: the same floats and roundings as the scalar form below, so the same bytes, five times
// faster (kernels_bench BM_QuantizeQ8K, 2048 elements: 0.38 us against 1.98 us for the scalar
// form; decode quantises every K-quant matmul's input this way, on one thread).
inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// The 16-element sums of 128 quants given as 16 vectors of 8 int32, as 8 int16.
inline __m128i sums_of_16(const __m256i* q) {
  __m256i s[8];
  for (int j = 0; j < 8; ++j) s[j] = _mm256_add_epi32(q[2 * j], q[2 * j + 1]);
  // hadd twice leaves, per 128-bit lane, the lane's part of 4 sums in order; adding the lanes
  // finishes them.
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  const __m128i lo = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i hi = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packs_epi32(lo, hi);
}

bool quantize_q8_k_block(const float* x, BlockQ8_K& y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax8 = _mm256_setzero_ps();
  // max_ps returns its second operand when either is NaN: NaNs are skipped, as in the scalar scan.
  for (int i = 0; i < 32; ++i) {
    amax8 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), amax8);
  }
  const float amax = horizontal_max(amax8);
  if (!(amax > 0.0f)) return false;
  float max = amax;
  for (int i = 0; i < 32; ++i) {
    const __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)),
                                    _mm256_set1_ps(amax), _CMP_EQ_OQ);
    if (const int mask = _mm256_movemask_ps(eq)) {
      max = x[8 * i + __builtin_ctz(static_cast<unsigned>(mask))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 scale = _mm256_set1_ps(iscale);
  for (int half = 0; half < 2; ++half) {
    __m256i q[16];
    for (int i = 0; i < 16; ++i) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 128 * half + 8 * i), scale);
      q[i] = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // |q| <= 127, so the saturating packs change nothing; they work per 128-bit lane and the
    // permutation restores element order.
    for (int i = 0; i < 16; i += 4) {
      const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[i], q[i + 1]),
                                            _mm256_packs_epi32(q[i + 2], q[i + 3]));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(y.qs + 128 * half + 8 * i),
          _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y.bsums + 8 * half), sums_of_16(q));
  }
  y.d = 1.0f / iscale;
  return true;
}
#else
bool quantize_q8_k_block(const float* x, BlockQ8_K& y) {
  float max = 0.0f, amax = 0.0f;
  for (int j = 0; j < 256; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) return false;
  const float iscale = -127.0f / max;
  for (int j = 0; j < 256; ++j) {
    const int v = nearest_int(iscale * x[j]);
    y.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
  }
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += y.qs[16 * j + i];
    y.bsums[j] = static_cast<int16_t>(sum);
  }
  y.d = 1.0f / iscale;
  return true;
}
#endif

void quantize_q8_k_acts(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    if (!quantize_q8_k_block(x + 256 * b, y[b])) std::memset(&y[b], 0, sizeof(BlockQ8_K));
  }
}

}  // namespace

void quantize_acts(ActFormat format, const float* x, void* out, int64_t n) {
  act_row_bytes(format, n);  // validates n
  switch (format) {
    case ActFormat::kQ8_0:
      quantize_q8_0_acts(x, static_cast<BlockQ8_0*>(out), n);
      return;
    case ActFormat::kQ8_1:
      quantize_q8_1_acts(x, static_cast<BlockQ8_1*>(out), n);
      return;
    case ActFormat::kQ8_K:
      quantize_q8_k_acts(x, static_cast<BlockQ8_K*>(out), n);
      return;
  }
}

const BlockTypeKernels* block_type_kernels(DType type) {
  if (const BlockTypeKernels* k = legacy_block_kernels(type)) return k;
  if (const BlockTypeKernels* k = iq4_block_kernels(type)) return k;
  return kquant_block_kernels(type);
}

}  // namespace k25::K25_KERNEL_SET
