#include "model/kv_dtype.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "util/error.h"

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source, which
// -Wuninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k25 {

const char* to_string(KvDtype dtype) {
  return dtype == KvDtype::kF16 ? "f16" : "f32";
}

KvDtype parse_kv_dtype(std::string_view text, const std::string& what) {
  if (text == "f32") return KvDtype::kF32;
  if (text == "f16") return KvDtype::kF16;
  if (text == "bf16" || text == "q8_0" || text == "q4_0") {
    fail(what, ": '", text, "' is not supported for the KV cache yet (use f32 or f16)");
  }
  fail(what, ": expected f32 or f16, got '", text, "'");
}

void kv_store_row(KvDtype dtype, const float* src, void* dst, int n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) out[i] = f32_to_f16(src[i]);
}

void kv_load_row(KvDtype dtype, const void* src, float* dst, int n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(in[i]);
}

}  // namespace k25
