// The KV cache seen by the forward pass: per (sequence, layer, position) one K and one V row of
// kv_dim floats. Later tiers (paged pool, L1 window, disk) implement the same interface.
#pragma once

#include <memory>
#include <vector>

namespace k25 {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Makes positions [0, n_positions) of `seq` writable/readable; throws k25::Error when the
  // cache cannot hold them.
  virtual void reserve(int seq, int n_positions) = 0;
  // Forgets every position of `seq` (its memory may be reused).
  virtual void clear(int seq) = 0;
  // Rows of positions [pos, pos + *n_contiguous) of `seq` in `layer` are contiguous, kv_dim
  // floats apart. pos must be < the reserved length.
  virtual float* keys(int seq, int layer, int pos, int* n_contiguous) = 0;
  virtual float* values(int seq, int layer, int pos, int* n_contiguous) = 0;
  // Writes the K and V rows (kv_dim floats each) of reserved position `pos`. The forward pass
  // writes every row through here. The default copies them through keys()/values(); a tier that
  // keeps a second copy of recent rows (L1WindowKvCache) overrides it to write both.
  virtual void store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim);
};

// One growable buffer per (sequence, layer): memory follows the longest position reserved,
// nothing is set aside for the maximum context up front.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(int n_layers, int kv_dim, int max_positions);
  void reserve(int seq, int n_positions) override;
  void clear(int seq) override;
  float* keys(int seq, int layer, int pos, int* n_contiguous) override;
  float* values(int seq, int layer, int pos, int* n_contiguous) override;
  size_t bytes_used() const;

 private:
  struct Sequence {
    int capacity = 0;
    std::vector<std::vector<float>> k, v;  // [layer][pos * kv_dim]
  };
  Sequence& sequence(int seq);
  int n_layers_, kv_dim_, max_positions_;
  std::vector<Sequence> sequences_;
};

}  // namespace k25
