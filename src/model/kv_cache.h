// The KV cache seen by the forward pass: per (sequence, layer, position) one key and one value of
// kv_dim elements of the cache's dtype() (kernels/kv_dtype.h). Values are rows; keys sit in tiles
// of consecutive positions (kv_dtype.h, kKeyTile). Later tiers (paged pool, L1 window, disk)
// implement the same interface.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/kv_dtype.h"

namespace k25 {

// Where a run of contiguous keys starts: the tile holding the first position (its element e of
// lane j at [e * width + j]), the position's lane, and how many positions from it on lie in this
// tile and the ones after it (each kv_dim * width elements after the previous one).
struct KeyRun {
  std::byte* tile;
  int lane;
  int width;
  int n;
};

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
  // The keys of positions pos, pos + 1, ... of `seq` in `layer` (KeyRun). pos must be < the
  // reserved length.
  virtual KeyRun key_run(int seq, int layer, int pos) = 0;
  // Values of positions [pos, pos + *n_contiguous) of `seq` in `layer` are contiguous rows,
  // kv_dim elements of dtype() apart. pos must be < the reserved length.
  virtual std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) = 0;
  // value_rows() as floats, for a cache whose dtype() is kF32 (throws k25::Error otherwise).
  float* values(int seq, int layer, int pos, int* n_contiguous);
  // The key of reserved position `pos` (kv_dim elements) as floats.
  void load_key(int seq, int layer, int pos, float* out, int kv_dim);
  // Writes the key and value (kv_dim floats each, stored as dtype()) of reserved position `pos`.
  // The forward pass writes every position through here. The default converts them into
  // key_run()/value_rows(); a tier that keeps a second copy of recent positions
  // (L1WindowKvCache) overrides it to write both.
  virtual void store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim);

 private:
  void require_f32() const;
};

// One growable buffer per (sequence, layer) for keys and one for values: memory follows the longest
// position reserved (in whole key tiles), nothing is set aside for the maximum context up front.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(int n_layers, int kv_dim, int max_positions, KvDtype dtype = KvDtype::kF32);
  KvDtype dtype() const override { return dtype_; }
  void reserve(int seq, int n_positions) override;
  void clear(int seq) override;
  KeyRun key_run(int seq, int layer, int pos) override;
  std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) override;
  size_t bytes_used() const;

 private:
  struct Sequence {
    int capacity = 0;
    std::vector<std::vector<std::byte>> k, v;  // [layer][pos * row_bytes_], keys in kKeyTile tiles
  };
  Sequence& sequence(int seq);
  Sequence& reserved(int seq, int pos);
  int n_layers_, max_positions_;
  KvDtype dtype_;
  size_t row_bytes_;
  std::vector<Sequence> sequences_;
};

}  // namespace k25
