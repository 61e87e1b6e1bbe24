// The element type of stored KV rows (docs/kv-cache.md "KV element type"). The forward pass
// always computes K and V in float; a cache stores each row as `KvDtype` and attention reads it
// back in that type. F16 halves the bytes per token; F32 keeps the rows exactly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace k25 {

enum class KvDtype { kF32, kF16 };

constexpr size_t kv_dtype_bytes(KvDtype dtype) {
  return dtype == KvDtype::kF16 ? 2 : 4;
}

// "f32" or "f16".
const char* to_string(KvDtype dtype);
// Parses "f32" or "f16"; throws k25::Error naming `what` (a key or flag) otherwise, saying so
// for the GGUF types the cache does not store yet (bf16, q8_0, ...).
KvDtype parse_kv_dtype(std::string_view text, const std::string& what);

// dst = n floats of src stored as `dtype` (F16: round to nearest even, overflow to infinity).
void kv_store_row(KvDtype dtype, const float* src, void* dst, int n);
// dst = n elements of `dtype` at src, as floats (exact).
void kv_load_row(KvDtype dtype, const void* src, float* dst, int n);

}  // namespace k25
