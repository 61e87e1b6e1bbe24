#include "kernels/kv_dtype.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/quant.h"

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
  } else {
    f32_row_to_f16(src, static_cast<uint16_t*>(dst), n);
  }
}

void kv_load_row(KvDtype dtype, const void* src, float* dst, int n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else {
    f16_row_to_f32(static_cast<const uint16_t*>(src), dst, n);
  }
}

void kv_store_key(KvDtype dtype, const float* src, void* tile, int lane, int width, int n) {
  if (dtype == KvDtype::kF32) {
    float* out = static_cast<float*>(tile) + lane;
    for (int e = 0; e < n; ++e) out[static_cast<size_t>(e) * width] = src[e];
  } else {
    thread_local std::vector<uint16_t> halves;
    halves.resize(n);
    f32_row_to_f16(src, halves.data(), n);
    uint16_t* out = static_cast<uint16_t*>(tile) + lane;
    for (int e = 0; e < n; ++e) out[static_cast<size_t>(e) * width] = halves[e];
  }
}

void kv_load_key(KvDtype dtype, const void* tile, int lane, int width, float* dst, int n) {
  if (dtype == KvDtype::kF32) {
    const float* in = static_cast<const float*>(tile) + lane;
    for (int e = 0; e < n; ++e) dst[e] = in[static_cast<size_t>(e) * width];
  } else {
    thread_local std::vector<uint16_t> halves;
    halves.resize(n);
    const uint16_t* in = static_cast<const uint16_t*>(tile) + lane;
    for (int e = 0; e < n; ++e) halves[e] = in[static_cast<size_t>(e) * width];
    f16_row_to_f32(halves.data(), dst, n);
  }
}

}  // namespace k25
