// The KV cache seen by the forward pass: per (sequence, layer, position) one K and one V row of
// kv_dim elements of the cache's dtype() (kernels/kv_dtype.h). Later tiers (paged pool, L1 window,
// disk) implement the same interface.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/kv_dtype.h"

namespace k25 {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // The element type of every stored row.
  virtual KvDtype dtype() const = 0;
  // Makes positions [0, n_positions) of `seq` writable/readable; throws k25::Error when the
  // cache cannot hold them.
  virtual void reserve(int seq, int n_positions) = 0;
  // Forgets every position of `seq` (its memory may be reused).
  virtual void clear(int seq) = 0;
  // Rows of positions [pos, pos + *n_contiguous) of `seq` in `layer` are contiguous, kv_dim
  // elements of dtype() apart. pos must be < the reserved length.
  virtual std::byte* key_rows(int seq, int layer, int pos, int* n_contiguous) = 0;
  virtual std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) = 0;
  // key_rows()/value_rows() as floats, for a cache whose dtype() is kF32 (throws k25::Error
  // otherwise).
  float* keys(int seq, int layer, int pos, int* n_contiguous);
  float* values(int seq, int layer, int pos, int* n_contiguous);
  // Writes the K and V rows (kv_dim floats each, stored as dtype()) of reserved position `pos`.
  // The forward pass writes every row through here. The default converts them into
  // key_rows()/value_rows(); a tier that keeps a second copy of recent rows (L1WindowKvCache)
  // overrides it to write both.
  virtual void store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim);

 private:
  void require_f32() const;
};

// One growable buffer per (sequence, layer): memory follows the longest position reserved,
// nothing is set aside for the maximum context up front.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(int n_layers, int kv_dim, int max_positions, KvDtype dtype = KvDtype::kF32);
  KvDtype dtype() const override { return dtype_; }
  void reserve(int seq, int n_positions) override;
  void clear(int seq) override;
  std::byte* key_rows(int seq, int layer, int pos, int* n_contiguous) override;
  std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) override;
  size_t bytes_used() const;

 private:
  struct Sequence {
    int capacity = 0;
    std::vector<std::vector<std::byte>> k, v;  // [layer][pos * row_bytes_]
  };
  Sequence& sequence(int seq);
  std::byte* row(int seq, int layer, int pos, bool value, int* n_contiguous);
  int n_layers_, max_positions_;
  KvDtype dtype_;
  size_t row_bytes_;
  std::vector<Sequence> sequences_;
};

}  // namespace k25
