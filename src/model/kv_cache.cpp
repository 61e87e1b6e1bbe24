#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

namespace {
// Buffers grow by this many positions at least, so a decode step rarely reallocates.
constexpr int kGrowthPositions = 256;
}  // namespace

void KvCache::require_f32() const {
  if (dtype() != KvDtype::kF32) {
    fail("KV cache: rows are ", to_string(dtype()), ", not f32; read them with value_rows()");
  }
}

float* KvCache::values(int seq, int layer, int pos, int* n_contiguous) {
  require_f32();
  return reinterpret_cast<float*>(value_rows(seq, layer, pos, n_contiguous));
}

void KvCache::load_key(int seq, int layer, int pos, float* out, int kv_dim) {
  const KeyRun run = key_run(seq, layer, pos);
  kv_load_key(dtype(), run.tile, run.lane, run.width, out, kv_dim);
}

void KvCache::store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim) {
  const KeyRun run = key_run(seq, layer, pos);
  kv_store_key(dtype(), k, run.tile, run.lane, run.width, kv_dim);
  int n = 0;
  kv_store_row(dtype(), v, value_rows(seq, layer, pos, &n), kv_dim);
}

ContiguousKvCache::ContiguousKvCache(int n_layers, int kv_dim, int max_positions, KvDtype dtype)
    : n_layers_(n_layers),
      max_positions_(max_positions),
      dtype_(dtype),
      row_bytes_(static_cast<size_t>(kv_dim) * kv_dtype_bytes(dtype)) {}

ContiguousKvCache::Sequence& ContiguousKvCache::sequence(int seq) {
  if (seq < 0) fail("KV cache: negative sequence id ", seq);
  if (static_cast<size_t>(seq) >= sequences_.size()) sequences_.resize(seq + 1);
  return sequences_[seq];
}

void ContiguousKvCache::reserve(int seq, int n_positions) {
  if (n_positions > max_positions_) {
    fail("KV cache: sequence needs ", n_positions, " positions but the context holds ",
         max_positions_);
  }
  Sequence& s = sequence(seq);
  if (n_positions <= s.capacity) return;
  int capacity = std::min(max_positions_, std::max(n_positions, s.capacity + kGrowthPositions));
  const int key_positions = (capacity + kKeyTile - 1) / kKeyTile * kKeyTile;  // whole tiles
  s.k.resize(n_layers_);
  s.v.resize(n_layers_);
  for (int l = 0; l < n_layers_; ++l) {
    s.k[l].resize(static_cast<size_t>(key_positions) * row_bytes_);
    s.v[l].resize(static_cast<size_t>(capacity) * row_bytes_);
  }
  s.capacity = capacity;
}

void ContiguousKvCache::clear(int seq) {
  if (seq >= 0 && static_cast<size_t>(seq) < sequences_.size()) sequences_[seq] = Sequence{};
}

ContiguousKvCache::Sequence& ContiguousKvCache::reserved(int seq, int pos) {
  Sequence& s = sequence(seq);
  if (pos < 0 || pos >= s.capacity) {
    fail("KV cache: position ", pos, " of sequence ", seq, " not reserved");
  }
  return s;
}

KeyRun ContiguousKvCache::key_run(int seq, int layer, int pos) {
  Sequence& s = reserved(seq, pos);
  const int lane = pos % kKeyTile;
  return {s.k[layer].data() + static_cast<size_t>(pos - lane) * row_bytes_, lane, kKeyTile,
          s.capacity - pos};
}

std::byte* ContiguousKvCache::value_rows(int seq, int layer, int pos, int* n_contiguous) {
  Sequence& s = reserved(seq, pos);
  *n_contiguous = s.capacity - pos;
  return s.v[layer].data() + static_cast<size_t>(pos) * row_bytes_;
}

size_t ContiguousKvCache::bytes_used() const {
  size_t bytes = 0;
  for (const Sequence& s : sequences_) bytes += 2ull * n_layers_ * s.capacity * row_bytes_;
  return bytes;
}

}  // namespace k25
