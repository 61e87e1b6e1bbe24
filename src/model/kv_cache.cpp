#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace k25 {

namespace {
// Buffers grow by this many positions at least, so a decode step rarely reallocates.
constexpr int kGrowthPositions = 256;
}  // namespace

void KvCache::store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim) {
  int run = 0;
  const size_t bytes = static_cast<size_t>(kv_dim) * sizeof(float);
  std::memcpy(keys(seq, layer, pos, &run), k, bytes);
  std::memcpy(values(seq, layer, pos, &run), v, bytes);
}

ContiguousKvCache::ContiguousKvCache(int n_layers, int kv_dim, int max_positions)
    : n_layers_(n_layers), kv_dim_(kv_dim), max_positions_(max_positions) {}

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
  s.k.resize(n_layers_);
  s.v.resize(n_layers_);
  for (int l = 0; l < n_layers_; ++l) {
    s.k[l].resize(static_cast<size_t>(capacity) * kv_dim_);
    s.v[l].resize(static_cast<size_t>(capacity) * kv_dim_);
  }
  s.capacity = capacity;
}

void ContiguousKvCache::clear(int seq) {
  if (seq >= 0 && static_cast<size_t>(seq) < sequences_.size()) sequences_[seq] = Sequence{};
}

float* ContiguousKvCache::keys(int seq, int layer, int pos, int* n_contiguous) {
  Sequence& s = sequence(seq);
  if (pos >= s.capacity) fail("KV cache: position ", pos, " of sequence ", seq, " not reserved");
  *n_contiguous = s.capacity - pos;
  return s.k[layer].data() + static_cast<size_t>(pos) * kv_dim_;
}

float* ContiguousKvCache::values(int seq, int layer, int pos, int* n_contiguous) {
  Sequence& s = sequence(seq);
  if (pos >= s.capacity) fail("KV cache: position ", pos, " of sequence ", seq, " not reserved");
  *n_contiguous = s.capacity - pos;
  return s.v[layer].data() + static_cast<size_t>(pos) * kv_dim_;
}

size_t ContiguousKvCache::bytes_used() const {
  size_t bytes = 0;
  for (const Sequence& s : sequences_) {
    bytes += 2ull * n_layers_ * s.capacity * kv_dim_ * sizeof(float);
  }
  return bytes;
}

}  // namespace k25
