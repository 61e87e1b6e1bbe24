// The element type of stored KV rows (docs/kv-cache.md "KV element type"). The forward pass
// always computes K and V in float; a cache stores each row as `KvDtype` and attention reads it
// back in that type. F16 halves the bytes per token; F32 keeps the rows exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
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

// Keys are stored in tiles of consecutive positions (values stay rows): in a tile of width w,
// element e of its position j sits at [e * w + j], so attention reads element e of w keys in one
// load and a score is one chain of multiply-adds over e (docs/kv-cache.md "Key tiles"). A cache
// uses tiles of kKeyTile positions where its contiguous runs allow and narrower ones otherwise
// (key_tile_width); tiles begin at positions that are multiples of their width, and a tile of
// width 1 is a plain row.
constexpr int kKeyTile = 16;
// The widest tile a cache whose contiguous runs start every `run_positions` positions can use.
constexpr int key_tile_width(int run_positions) {
  return std::gcd(run_positions, kKeyTile);
}
// Stored pages and shared-tier entries carry this, so keys written in another layout are never
// read back as tiles.
constexpr uint64_t kKeyLayoutVersion = 2;

// The n floats of src stored as `dtype` into the key at `lane` of a tile of `width` positions.
void kv_store_key(KvDtype dtype, const float* src, void* tile, int lane, int width, int n);
// The key at `lane` of a tile of `width` positions (n elements of `dtype`), as floats.
void kv_load_key(KvDtype dtype, const void* tile, int lane, int width, float* dst, int n);

}  // namespace k25
